package testkit

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/wire"
)

// Payloads returns ss as byte slices.
func Payloads(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// Records returns payloads as records with the sequence IDs first,
// first+1, ... (nil for none).
func Records(first uint64, payloads [][]byte) []broker.Record {
	if len(payloads) == 0 {
		return nil
	}
	out := make([]broker.Record, len(payloads))
	for i, p := range payloads {
		out[i] = broker.Record{Seq: first + uint64(i), Payload: p}
	}
	return out
}

// MetaRecords are records with every combination of metadata: key alone,
// headers alone (a repeated key, an empty value), event time alone, all of
// them, none, an empty payload; sequence IDs with a gap.
func MetaRecords() []broker.Record {
	hs := []wire.Header{{Key: "trace", Value: []byte("00-4bf9")}, {Key: "trace", Value: []byte{}}, {Key: "tenant", Value: []byte("acme")}}
	return []broker.Record{
		{Seq: 1, Payload: []byte("key only"), Key: []byte("user-17")},
		{Seq: 2, Payload: []byte("headers only"), Headers: hs},
		{Seq: 3, Payload: []byte("time only"), EventTime: time.Unix(1700000000, 123456789)},
		{Seq: 7, Payload: []byte("all"), Key: []byte{0, 1, 2}, Headers: hs[2:], EventTime: time.Unix(-86400, 1)},
		{Seq: 8, Payload: []byte("none")},
		{Seq: 9, Payload: []byte{}, Key: []byte("k")},
	}
}

// Scribble zeroes every byte recs' slices point to, as a caller reusing its
// buffers would: a store that kept views instead of copies shows it.
func Scribble(recs []broker.Record) {
	for _, r := range recs {
		clear(r.Payload)
		clear(r.Key)
		for _, h := range r.Headers {
			clear(h.Value)
		}
	}
}

// RequireSameRecords compares records field by field (times with Equal).
func RequireSameRecords(t testing.TB, want, got []broker.Record) {
	t.Helper()
	require.Len(t, got, len(want))
	for i, w := range want {
		g := got[i]
		assert.Equal(t, w.Seq, g.Seq, "record %d seq", i)
		assert.True(t, bytes.Equal(w.Payload, g.Payload), "record %d payload %q, want %q", i, g.Payload, w.Payload)
		assert.True(t, bytes.Equal(w.Key, g.Key), "record %d key %q, want %q", i, g.Key, w.Key)
		assert.True(t, w.EventTime.Equal(g.EventTime), "record %d event time %v, want %v", i, g.EventTime, w.EventTime)
		require.Len(t, g.Headers, len(w.Headers), "record %d headers", i)
		for j := range w.Headers {
			assert.Equal(t, w.Headers[j].Key, g.Headers[j].Key, "record %d header %d", i, j)
			assert.True(t, bytes.Equal(w.Headers[j].Value, g.Headers[j].Value), "record %d header %d value", i, j)
		}
	}
}

// SeqRange returns first, first+1, ..., last.
func SeqRange(first, last uint64) []uint64 {
	var s []uint64
	for q := first; q <= last; q++ {
		s = append(s, q)
	}
	return s
}

// Seqs returns the sequence IDs store holds for name on wire.DefaultTopic,
// in order.
func Seqs(store *broker.MemoryStore, name string) []uint64 {
	var s []uint64
	for _, r := range store.Records(name) {
		s = append(s, r.Seq)
	}
	return s
}

// ReadDir returns the contents of every file in dir, by name: what a test
// compares before and after something that must not write.
func ReadDir(t testing.TB, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		out[e.Name()] = string(b)
	}
	return out
}

// StatsAfter returns b's Stats once they count at least batches BATCH
// frames, failing the test after 10 s. The broker counts a frame just
// after it handed the frame's receipt on, on the topic's goroutine: a test
// that holds the last receipt may otherwise read Stats before the count.
func StatsAfter(t testing.TB, b *broker.Broker, batches uint64) broker.Stats {
	t.Helper()
	WaitUntil(t, fmt.Sprintf("%d batches counted", batches), func() bool { return b.Stats().Batches >= batches })
	return b.Stats()
}
