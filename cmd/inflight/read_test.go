package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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
	require.NoError(t, w.Append("orders", "till-1", 0, []broker.Record{
		{Seq: 1, Payload: []byte("espresso"), Key: []byte("table-7"), EventTime: at,
			Headers: []wire.Header{{Key: "src", Value: []byte("cli")}, {Key: "bin", Value: []byte{0xff}}}},
		{Seq: 2, Payload: []byte{0, 0xfe, '"'}},
	}))
	require.NoError(t, w.Append("clicks", "web", 0, []broker.Record{{Seq: 7, Payload: []byte("click")}}))
	require.NoError(t, w.Append("orders", "till-1", 0, []broker.Record{{Seq: 3, Payload: []byte("croissant")}}))
	store := "-store=file:" + path

	code, out, errOut := runCmd(t, "read", store)
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, `topic="orders" producer="till-1" seq=1 key="table-7" time=2026-12-03T09:00:00.000000005Z header."src"="cli" header."bin"="\xff" payload="espresso"
topic="orders" producer="till-1" seq=2 payload="\x00\xfe\""
topic="clicks" producer="web" seq=7 payload="click"
topic="orders" producer="till-1" seq=3 payload="croissant"
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
	assert.Equal(t, []byte("table-7"), first.KeyBase64)
	assert.True(t, at.Equal(*first.EventTime))
	cli := "cli"
	assert.Equal(t, []jsonHeader{{Key: "src", Value: &cli, ValueBase64: []byte("cli")}, {Key: "bin", ValueBase64: []byte{0xff}}}, first.Headers)
	assert.Equal(t, "espresso", *first.Payload)
	assert.Equal(t, []byte("espresso"), first.PayloadBase64, "base64 always")
	assert.Nil(t, second.Payload, "bytes that are not UTF-8 have no text")
	assert.Equal(t, []byte{0, 0xfe, '"'}, second.PayloadBase64)

	code, _, errOut = runCmd(t, "read", "-store=file:"+filepath.Join(t.TempDir(), "missing"))
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, errOut, "no such file")
}

// TestReadJSONFields: every JSON line has the same fields under the same
// names, whatever the record holds (text or other bytes, a key or none,
// empty values, headers or none): a jq filter never has to ask which field
// a record used.
func TestReadJSONFields(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	w, err := file.Open(path)
	require.NoError(t, err)
	defer w.Close()
	at := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	require.NoError(t, w.Append("orders", "till-1", 0, []broker.Record{
		{Seq: 1, Payload: []byte(`{"item":"espresso"}`), Key: []byte("table-7"), EventTime: at,
			Headers: []wire.Header{{Key: "src", Value: []byte("cli")}, {Key: "empty", Value: []byte{}}}},
		{Seq: 2, Payload: []byte{0xff, 0}, Key: []byte{0xc3}},
		{Seq: 3},
	}))
	code, out, errOut := runCmd(t, "read", "-store=file:"+path, "-format=json")
	require.Equal(t, exitOK, code, errOut)
	want := []string{
		`{"topic":"orders","producer":"till-1","seq":1,"key":"table-7","key_base64":"dGFibGUtNw==","event_time":"2026-12-03T09:00:00Z",` +
			`"headers":[{"key":"src","value":"cli","value_base64":"Y2xp"},{"key":"empty","value":"","value_base64":""}],` +
			`"payload":"{\"item\":\"espresso\"}","payload_base64":"eyJpdGVtIjoiZXNwcmVzc28ifQ=="}`,
		`{"topic":"orders","producer":"till-1","seq":2,"key":null,"key_base64":"ww==","event_time":null,"headers":[],"payload":null,"payload_base64":"/wA="}`,
		`{"topic":"orders","producer":"till-1","seq":3,"key":null,"key_base64":null,"event_time":null,"headers":[],"payload":"","payload_base64":""}`,
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, len(want))
	var fields []string
	for i, l := range lines {
		assert.JSONEq(t, want[i], l)
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m))
		keys := slices.Sorted(maps.Keys(m))
		if i == 0 {
			fields = keys
		}
		assert.Equal(t, fields, keys, "line %d has the fields of line 1", i+1)
	}
}

// TestReadQuotesNames: names, topics and header keys are quoted in the
// text format like payloads, so a producer name or header key holding a
// newline, a quote or an escape sequence cannot forge a line (nor clear
// the screen): one line per record, no control byte, and the name reads
// back with strconv.Unquote.
func TestReadQuotesNames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	w, err := file.Open(path)
	require.NoError(t, err)
	defer w.Close()
	forger := "x seq=1 payload=\"ok\"\ntopic=default producer=legit\x1b[2J"
	require.NoError(t, w.Append("default", forger, 0, []broker.Record{
		{Seq: 1, Payload: []byte("forged"), Headers: []wire.Header{{Key: "k\npayload=\"x\" \x1b]0;title\a", Value: []byte("v")}}},
	}))
	require.NoError(t, w.Append("default", "legit", 0, []broker.Record{{Seq: 1, Payload: []byte("real")}}))
	code, out, errOut := runCmd(t, "read", "-store=file:"+path)
	require.Equal(t, exitOK, code, errOut)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 2, out)
	for _, c := range out {
		assert.False(t, c != '\n' && (c < 0x20 || c == 0x7f), "control byte %q in the output", c)
	}
	assert.Equal(t, `topic="default" producer="legit" seq=1 payload="real"`, lines[1])
	name, err := strconv.Unquote(strings.TrimPrefix(regexp.MustCompile(`producer=("(?:[^"\\]|\\.)*")`).FindString(lines[0]), "producer="))
	require.NoError(t, err)
	assert.Equal(t, forger, name)
	assert.Contains(t, lines[0], `header."k\npayload=\"x\" \x1b]0;title\a"="v"`)
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
		require.NoError(t, w.Append("orders", "p", 0, []broker.Record{{Seq: seq, Payload: []byte(payload)}}))
		fmt.Fprintf(&want, "topic=\"orders\" producer=\"p\" seq=%d payload=%q\n", seq, payload)
	}
	require.Greater(t, len(w.Segments()), 3)
	code, out, errOut := runCmd(t, "read", "-store=file:"+path)
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, want.String(), out)
}
