package file_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/store/file"
	"github.com/inflightmq/inflight/wire"
)

// TestMessageFieldsRoundTrip stores records with every metadata field, after
// scribbling over the caller's buffers (the store must copy), and reads them
// back before and after a reopen.
func TestMessageFieldsRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	s := openFileStore(t, path)
	in := testkit.MetaRecords()
	require.NoError(t, s.Append("eu.orders", "p", 0, in))
	testkit.Scribble(in)
	scan := func(s *file.Store) []broker.Record {
		var got []broker.Record
		require.NoError(t, s.Scan(func(topic, producer string, r broker.Record) error {
			require.Equal(t, "eu.orders", topic)
			require.Equal(t, "p", producer)
			c := broker.NewMemoryStore() // copies the views, headers included
			require.NoError(t, c.Append(topic, producer, 0, []broker.Record{r}))
			got = append(got, c.TopicRecords(topic, producer)...)
			return nil
		}))
		return got
	}
	testkit.RequireSameRecords(t, testkit.MetaRecords(), scan(s))
	require.NoError(t, s.Close())
	s = openFileStore(t, path)
	defer s.Close()
	testkit.RequireSameRecords(t, testkit.MetaRecords(), scan(s))
	last, err := lastSeq(s, "eu.orders", "p")
	require.NoError(t, err)
	assert.Equal(t, uint64(9), last)
}

// TestTopicsDeduplicateSeparately: the store keeps one producer name's
// sequences on two topics apart, across a reopen.
func TestTopicsDeduplicateSeparately(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	s := openFileStore(t, path)
	require.NoError(t, s.Append("a", "p", 0, seqRecs(1, [][]byte{[]byte("x"), []byte("y")})))
	require.NoError(t, s.Append("c", "p", 0, seqRecs(1, [][]byte{[]byte("z")})))
	require.Error(t, s.Append("a", "p", 0, seqRecs(2, [][]byte{[]byte("dup")})))
	require.NoError(t, s.Close())
	s = openFileStore(t, path)
	defer s.Close()
	for topic, want := range map[string]uint64{"a": 2, "c": 1, dflt: 0} {
		last, err := lastSeq(s, topic, "p")
		require.NoError(t, err)
		assert.Equal(t, want, last, "topic %s", topic)
	}
}

// TestOpensVersion1 opens a file a version 1 store wrote: its
// records read as topic "default" without metadata, their producers keep
// deduplicating, the header is upgraded (an older inflight then refuses the
// file rather than cut what it cannot read), and new entries append after.
func TestOpensVersion1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	require.NoError(t, os.WriteFile(path, append([]byte("IFLT\x00\x00\x00\x01"), v1Entries()...), 0o600))
	s := openFileStore(t, path)
	assert.Equal(t, file.Recovery{Entries: 2, Records: 3, UpgradedFrom: 1}, s.Recovery())
	for name, want := range map[string]uint64{"old": 2, "p": 9} {
		last, err := lastSeq(s, dflt, name)
		require.NoError(t, err)
		assert.Equal(t, want, last, name)
	}
	require.Error(t, s.Append(dflt, "p", 0, seqRecs(9, [][]byte{[]byte("dup")})), "dedup state survives")
	require.NoError(t, s.Append(dflt, "p", 0, []broker.Record{{Seq: 10, Payload: []byte("new"), Key: []byte("k")}}))
	require.NoError(t, s.Close())

	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, []byte("IFLT\x00\x00\x00\x06"), got[:8])

	s = openFileStore(t, path)
	defer s.Close()
	assert.Equal(t, file.Recovery{Entries: 3, Records: 4}, s.Recovery())
	var seen []string
	require.NoError(t, s.Scan(func(topic, producer string, r broker.Record) error {
		seen = append(seen, fmt.Sprintf("%s/%s/%d/%s/%s/%d", topic, producer, r.Seq, r.Payload, r.Key, len(r.Headers)))
		return nil
	}))
	assert.Equal(t, []string{"default/old/1/a//0", "default/old/2///0", "default/p/9/z//0", "default/p/10/new/k/0"}, seen)
}

// TestRawRecordsStoredAsTheyArrived: records that carry their wire bytes
// (Raw, as the broker hands them over) are written as they are, into the
// same bytes as the same records encoded from their fields, and read back
// the same.
func TestRawRecordsStoredAsTheyArrived(t *testing.T) {
	want := testkit.MetaRecords()
	var bb wire.BatchBuilder
	bb.Reset(nil, 1)
	for _, r := range want {
		bb.AddRecord(r.Payload, r.Key, r.Headers, r.EventTime)
	}
	b, err := wire.DecodeBatch(bb.Finish())
	require.NoError(t, err)
	it, err := b.Records()
	require.NoError(t, err)
	raw := make([]broker.Record, len(want))
	for i := range raw {
		rec, ok := it.Next()
		require.True(t, ok)
		raw[i] = broker.Record{Seq: want[i].Seq, Raw: rec}
		// The fields are what the broker reads from Raw; the store writes Raw.
		raw[i].Payload, raw[i].Key, raw[i].Headers, raw[i].EventTime = want[i].Payload, want[i].Key, want[i].Headers, want[i].EventTime
	}

	path := filepath.Join(t.TempDir(), "store")
	s := openFileStore(t, path)
	defer s.Close()
	size := func() int64 {
		var n int64
		for _, seg := range s.Segments() {
			n += seg.Bytes
		}
		return n
	}
	before := size()
	require.NoError(t, s.Append(dflt, "fields", 0, testkit.MetaRecords()))
	fromFields := size() - before
	require.NoError(t, s.Append(dflt, "rawrec", 0, raw))
	assert.Equal(t, fromFields, size()-before-fromFields, "the same entry size (names of equal length)")

	got := map[string][]broker.Record{}
	require.NoError(t, s.Scan(func(_, producer string, r broker.Record) error {
		c := broker.NewMemoryStore() // copies the views
		require.NoError(t, c.Append(dflt, producer, 0, []broker.Record{r}))
		got[producer] = append(got[producer], c.Records(producer)...)
		return nil
	}))
	testkit.RequireSameRecords(t, want, got["fields"])
	testkit.RequireSameRecords(t, want, got["rawrec"])
}
