package main

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProduceTopicsRoundRobin: produce -topics a,b,c sends message i to
// topic i mod 3 on one producer; each topic holds its messages once, in
// send order, with sequence IDs 1, 2, 3... of its own. More messages than
// produce has message slots, so slots are reused across topics (a slot
// reused before its callback ran would store another message's payload).
func TestProduceTopicsRoundRobin(t *testing.T) {
	s := newRecordingStore(false)
	addr, stop := serveWith(t, s)
	defer stop()

	code, out, errOut := runCmd(t, "produce", "-addr="+addr, "-topics=a,b,c", "-n=45000", "-name=rr", "-progress=1h")
	require.Equal(t, exitOK, code, "%s\n%s", out, errOut)
	assert.True(t, strings.HasPrefix(out, `producer "rr", topics "a", "b", "c" (round robin), broker `), out)
	assert.Contains(t, out, "45,000 acked, 0 failed")
	for k, topic := range []string{"a", "b", "c"} {
		got := s.stored(t, topic, "rr")
		require.Len(t, got, 15000, topic)
		for j, p := range got {
			// The load generator's payload starts with the message's number.
			require.Equal(t, uint64(3*j+k), binary.BigEndian.Uint64([]byte(p)), "topic %s, message %d", topic, j)
		}
	}

	for _, args := range [][]string{
		{"-topics=a,,b"}, {"-topics=a", "-topic=b"}, {"-topics=" + strings.Repeat("t", 256)},
		{"-topics=a", "-input=-", "-input-format=topic-tab"}, {"-input-format=topic-tab"}, {"-input=-", "-input-format=csv"},
	} {
		code, _, errOut := runCmd(t, append([]string{"produce", "-addr=" + addr}, args...)...)
		assert.Equal(t, exitUsage, code, "%v: %s", args, errOut)
		assert.NotEmpty(t, errOut)
	}
}

// TestProduceInputTopics: with -input-format topic-tab each line is
// TOPIC<TAB>PAYLOAD (the payload may hold tabs; an empty topic is -topic's),
// every line goes to its topic, in order per topic; a line without a tab
// stops produce with its number, after the lines before it were sent.
func TestProduceInputTopics(t *testing.T) {
	s := newRecordingStore(false)
	addr, stop := serveWith(t, s)
	defer stop()
	input := "orders\tespresso\npayments\t3.20\norders\tcortado\twith\ttabs\r\n\tto the default\norders\t\npayments\t2.80"

	code, out, errOut := runCmdInput(t, input, "produce", "-addr="+addr, "-input=-", "-input-format=topic-tab", "-topic=misc", "-name=tabs", "-progress=1h")
	require.Equal(t, exitOK, code, "%s\n%s", out, errOut)
	assert.True(t, strings.HasPrefix(out, `producer "tabs", topics from -input (empty: "misc"), broker `), out)
	assert.Contains(t, out, "6 acked, 0 failed")
	assert.Equal(t, []string{"espresso", "cortado\twith\ttabs", ""}, s.stored(t, "orders", "tabs"))
	assert.Equal(t, []string{"3.20", "2.80"}, s.stored(t, "payments", "tabs"))
	assert.Equal(t, []string{"to the default"}, s.stored(t, "misc", "tabs"))

	code, out, errOut = runCmdInput(t, "orders\tok\nno tab here\norders\tnever\n", "produce", "-addr="+addr, "-input=-", "-input-format=topic-tab", "-name=no-tab", "-progress=1h")
	assert.Equal(t, exitFailure, code, out)
	assert.Equal(t, "inflight produce: -input: line 2: no tab after a topic (-input-format topic-tab: TOPIC<TAB>PAYLOAD)\n", errOut)
	assert.Equal(t, []string{"ok"}, s.stored(t, "orders", "no-tab"))
}
