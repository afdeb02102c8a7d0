package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/store/file"
	"github.com/inflightmq/inflight/wire"
)

// TestReadCommand: inflight read prints a file store's records, filtered,
// as text or JSON, while a broker's file.Store holds the store's lock.
func TestReadCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	w, err := file.Open(path)
	require.NoError(t, err)
	defer w.Close() // still open, locked, while read runs
	at := time.Date(2026, 12, 3, 9, 0, 0, 5, time.UTC)
	require.NoError(t, w.Append("orders", "till-1", []broker.Record{
		{Seq: 1, Payload: []byte("espresso"), Key: []byte("table-7"), EventTime: at,
			Headers: []wire.Header{{Key: "src", Value: []byte("cli")}, {Key: "bin", Value: []byte{0xff}}}},
		{Seq: 2, Payload: []byte{0, 0xfe, '"'}},
	}))
	require.NoError(t, w.Append("clicks", "web", []broker.Record{{Seq: 7, Payload: []byte("click")}}))
	require.NoError(t, w.Append("orders", "till-1", []broker.Record{{Seq: 3, Payload: []byte("croissant")}}))
	store := "-store=file:" + path

	code, out, errOut := runCmd(t, "read", store)
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, `topic=orders producer=till-1 seq=1 key="table-7" time=2026-12-03T09:00:00.000000005Z header.src="cli" header.bin="\xff" payload="espresso"
topic=orders producer=till-1 seq=2 payload="\x00\xfe\""
topic=clicks producer=web seq=7 payload="click"
topic=orders producer=till-1 seq=3 payload="croissant"
`, out)

	for _, tc := range []struct {
		args []string
		seqs string
	}{
		{[]string{"-topic=orders"}, "1 2 3"},
		{[]string{"-producer=web"}, "7"},
		{[]string{"-topic=orders", "-from=2"}, "2 3"},
		{[]string{"-n=2"}, "1 2"},
		{[]string{"-topic=nope"}, ""},
	} {
		code, out, errOut := runCmd(t, append([]string{"read", store}, tc.args...)...)
		require.Equal(t, exitOK, code, errOut)
		var seqs []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			for _, f := range strings.Fields(l) {
				if s, ok := strings.CutPrefix(f, "seq="); ok {
					seqs = append(seqs, s)
				}
			}
		}
		assert.Equal(t, tc.seqs, strings.Join(seqs, " "), "%v", tc.args)
	}

	code, out, errOut = runCmd(t, "read", store, "-format=json", "-topic=orders", "-n=2")
	require.Equal(t, exitOK, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2)
	var first, second jsonLine
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &second))
	assert.Equal(t, "orders", first.Topic)
	assert.Equal(t, "till-1", first.Producer)
	assert.Equal(t, uint64(1), first.Seq)
	assert.Equal(t, "table-7", *first.Key)
	assert.True(t, at.Equal(*first.EventTime))
	assert.Equal(t, []jsonHeader{{Key: "src", Value: "cli"}, {Key: "bin", ValueBase64: []byte{0xff}}}, first.Headers)
	assert.Equal(t, "espresso", *first.Payload)
	assert.Nil(t, second.Payload)
	assert.Equal(t, []byte{0, 0xfe, '"'}, second.PayloadBase64, "bytes that are not UTF-8 in base64")

	code, _, errOut = runCmd(t, "read", "-store=file:"+filepath.Join(t.TempDir(), "missing"))
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, errOut, "no such file")
}

// TestReadCommandSegments: read prints the records of every segment, oldest
// first, while the writer keeps the store open.
func TestReadCommandSegments(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	w, err := file.Open(path, file.SegmentBytes(4096))
	require.NoError(t, err)
	defer w.Close()
	payload := strings.Repeat("x", 1500)
	var want strings.Builder
	for seq := uint64(1); seq <= 10; seq++ {
		require.NoError(t, w.Append("orders", "p", []broker.Record{{Seq: seq, Payload: []byte(payload)}}))
		fmt.Fprintf(&want, "topic=orders producer=p seq=%d payload=%q\n", seq, payload)
	}
	require.Greater(t, len(w.Segments()), 3)
	code, out, errOut := runCmd(t, "read", "-store=file:"+path)
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, want.String(), out)
}
