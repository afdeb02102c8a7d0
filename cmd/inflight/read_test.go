package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
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
	"github.com/inflightmq/inflight/internal/testkit"
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
	assert.Equal(t, "orders", *first.Topic)
	assert.Equal(t, "till-1", *first.Producer)
	assert.Equal(t, uint64(1), first.Seq)
	assert.Equal(t, "table-7", *first.Key)
	assert.Equal(t, []byte("table-7"), first.KeyBase64)
	assert.True(t, at.Equal(*first.EventTime))
	cli, src, bin := "cli", "src", "bin"
	assert.Equal(t, []jsonHeader{{Key: &src, KeyBase64: []byte(src), Value: &cli, ValueBase64: []byte("cli")}, {Key: &bin, KeyBase64: []byte(bin), ValueBase64: []byte{0xff}}}, first.Headers)
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
		`{"topic":"orders","topic_base64":"b3JkZXJz","producer":"till-1","producer_base64":"dGlsbC0x","seq":1,"key":"table-7","key_base64":"dGFibGUtNw==","event_time":"2026-12-03T09:00:00Z",` +
			`"headers":[{"key":"src","key_base64":"c3Jj","value":"cli","value_base64":"Y2xp"},{"key":"empty","key_base64":"ZW1wdHk=","value":"","value_base64":""}],` +
			`"payload":"{\"item\":\"espresso\"}","payload_base64":"eyJpdGVtIjoiZXNwcmVzc28ifQ=="}`,
		`{"topic":"orders","topic_base64":"b3JkZXJz","producer":"till-1","producer_base64":"dGlsbC0x","seq":2,"key":null,"key_base64":"ww==","event_time":null,"headers":[],"payload":null,"payload_base64":"/wA="}`,
		`{"topic":"orders","topic_base64":"b3JkZXJz","producer":"till-1","producer_base64":"dGlsbC0x","seq":3,"key":null,"key_base64":null,"event_time":null,"headers":[],"payload":"","payload_base64":""}`,
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

// TestReadJSONKeepsInvalidUTF8Names: producer names, topics and header
// keys that are not UTF-8 come out exactly in their _base64 fields (text
// null), so two names that differ only there never print alike (issue 30
// item 5: "a\xff\xfeb" and "a\xfe\xffb" both printed "a\ufffd\ufffdb").
func TestReadJSONKeepsInvalidUTF8Names(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	w, err := file.Open(path)
	require.NoError(t, err)
	defer w.Close()
	names := []string{"a\xff\xfeb", "a\xfe\xffb"}
	for _, name := range names {
		require.NoError(t, w.Append("t\xff", name, 0, []broker.Record{
			{Seq: 1, Payload: []byte("p"), Headers: []wire.Header{{Key: "k\xfe" + name, Value: []byte("v")}}},
		}))
	}
	code, out, errOut := runCmd(t, "read", "-store=file:"+path, "-format=json")
	require.Equal(t, exitOK, code, errOut)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, len(names))
	for i, l := range lines {
		var rec struct {
			Topic          *string `json:"topic"`
			TopicBase64    []byte  `json:"topic_base64"`
			Producer       *string `json:"producer"`
			ProducerBase64 []byte  `json:"producer_base64"`
			Headers        []struct {
				Key       *string `json:"key"`
				KeyBase64 []byte  `json:"key_base64"`
			} `json:"headers"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &rec))
		assert.Nil(t, rec.Topic, "not UTF-8: no text")
		assert.Equal(t, "t\xff", string(rec.TopicBase64))
		assert.Nil(t, rec.Producer)
		assert.Equal(t, names[i], string(rec.ProducerBase64), "the name, exactly")
		require.Len(t, rec.Headers, 1)
		assert.Nil(t, rec.Headers[0].Key)
		assert.Equal(t, "k\xfe"+names[i], string(rec.Headers[0].KeyBase64))
	}
	assert.NotEqual(t, lines[0], lines[1], "two names, two lines")
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

// TestReadDamagedStorePrintsIntactRecords: read of a store with one bit
// flipped prints every record before the damage, then fails naming it
// (exit 1): in the active segment (once 0 records were printed), and in a
// sealed segment; with -skip-damaged it goes on with the next segment, says
// what it skipped, and prints the intact later segments too (exit 1).
// Reading changes no byte of the store.
func TestReadDamagedStorePrintsIntactRecords(t *testing.T) {
	const n = 300
	write := func(t *testing.T, opts ...file.Option) (string, []file.SegmentInfo) {
		path := filepath.Join(t.TempDir(), "store")
		w, err := file.Open(path, append(opts, file.Fsync(file.FsyncNone))...)
		require.NoError(t, err)
		for i := 1; i <= n; i++ {
			require.NoError(t, w.Append(wire.DefaultTopic, "p", 0, []broker.Record{{Seq: uint64(i), Payload: fmt.Appendf(nil, "record-%03d-%s", i, strings.Repeat("x", 60))}}))
		}
		segs := w.Segments()
		require.NoError(t, w.Close())
		return path, segs
	}
	flip := func(t *testing.T, p string) {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		b[len(b)/2] ^= 0x04
		require.NoError(t, os.WriteFile(p, b, 0o600))
	}
	// seqs returns the sequence IDs printed, checking each line's payload.
	seqs := func(t *testing.T, out string) []int {
		var got []int
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if l == "" {
				continue
			}
			var seq int
			_, err := fmt.Sscanf(l[strings.Index(l, "seq="):], "seq=%d", &seq)
			require.NoError(t, err, l)
			require.Contains(t, l, fmt.Sprintf(`payload="record-%03d-`, seq))
			got = append(got, seq)
		}
		return got
	}
	run := func(t *testing.T, path string, args ...string) (int, []int, string) {
		before := testkit.ReadDir(t, filepath.Dir(path))
		code, out, errOut := runCmd(t, append([]string{"read", "-store=file:" + path}, args...)...)
		assert.Equal(t, before, testkit.ReadDir(t, filepath.Dir(path)), "reading changes nothing")
		return code, seqs(t, out), errOut
	}
	upTo := func(a, b int) []int {
		var s []int
		for i := a; i <= b; i++ {
			s = append(s, i)
		}
		return s
	}

	t.Run("active segment", func(t *testing.T) {
		path, _ := write(t)
		flip(t, path)
		code, got, errOut := run(t, path)
		assert.Equal(t, exitFailure, code)
		require.NotEmpty(t, got, "the records before the damage")
		assert.Equal(t, upTo(1, len(got)), got)
		assert.Less(t, len(got), n)
		assert.Regexp(t, `inflight read: inflight/file: store file corrupt: .*store: bad entry at offset \d+`, errOut)
		t.Logf("%d of %d records printed; stderr: %s", len(got), n, errOut)
	})

	t.Run("sealed segment", func(t *testing.T) {
		path, segs := write(t, file.SegmentBytes(4<<10))
		require.Greater(t, len(segs), 4)
		flip(t, segs[1].Path)

		code, got, errOut := run(t, path)
		assert.Equal(t, exitFailure, code)
		require.NotEmpty(t, got)
		assert.Equal(t, upTo(1, len(got)), got)
		assert.Contains(t, errOut, segs[1].Path)
		assert.Contains(t, errOut, "-skip-damaged reads them")
		before := len(got)

		code, got, errOut = run(t, path, "-skip-damaged")
		assert.Equal(t, exitFailure, code)
		require.Equal(t, upTo(1, before), got[:before], "the records before the damage")
		after := got[before:]
		require.NotEmpty(t, after, "the segments after the damaged one")
		assert.Greater(t, after[0], before+1, "the rest of the damaged segment is skipped")
		assert.Equal(t, upTo(after[0], n), after, "every record of the later segments")
		assert.Regexp(t, `inflight read: skipped \d+ bytes of `+regexp.QuoteMeta(segs[1].Path)+` from offset \d+, damaged`, errOut)
		assert.Contains(t, errOut, "1 damaged segments were read only up to their damage")
		t.Logf("-skip-damaged: %d of %d records printed; stderr: %s", len(got), n, errOut)
	})
}
