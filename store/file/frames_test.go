package file_test

import (
	"bytes"
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/store/file"
	"github.com/inflightmq/inflight/transport/mem"
	"github.com/inflightmq/inflight/wire"
)

// frameOf is the frame a producer sends of recs, numbered from first (the
// records' own sequence IDs are ignored): what the broker hands to
// AppendFrames.
func frameOf(t testing.TB, first uint64, recs []broker.Record) broker.Frame {
	t.Helper()
	var bb wire.BatchBuilder
	bb.Reset(nil, 0, first)
	for _, r := range recs {
		bb.AddRecord(r.Payload, r.Key, r.Headers, r.EventTime)
	}
	b, err := wire.DecodeBatch(bb.Finish())
	require.NoError(t, err)
	return broker.Frame{FirstSeq: first, Count: len(recs), Records: b.Data}
}

// renumber returns recs with the sequence IDs first, first+1, ...
func renumber(first uint64, recs []broker.Record) []broker.Record {
	out := make([]broker.Record, len(recs))
	for i, r := range recs {
		r.Seq = first + uint64(i)
		out[i] = r
	}
	return out
}

// scanRecords returns the records of (topic, producer) in s, copied.
func scanRecords(t testing.TB, s *file.Store, topic, producer string) []broker.Record {
	t.Helper()
	var out []broker.Record
	require.NoError(t, s.Scan(func(tp, p string, r broker.Record) error {
		if tp == topic && p == producer {
			r.Payload, r.Key, r.Raw = bytes.Clone(r.Payload), bytes.Clone(r.Key), nil
			hs := make([]wire.Header, len(r.Headers))
			for i, h := range r.Headers {
				hs[i] = wire.Header{Key: h.Key, Value: bytes.Clone(h.Value)}
			}
			r.Headers = hs
			out = append(out, r)
		}
		return nil
	}))
	return out
}

// TestAppendFramesStores: frames of records with every kind of metadata,
// under each fsync policy, are stored as sent and read back so after a
// reopen, with the topic's last sequence ID; an Append after them goes on.
func TestAppendFramesStores(t *testing.T) {
	for _, policy := range []file.FsyncPolicy{file.FsyncNone, file.FsyncBatch, file.FsyncInterval} {
		t.Run(policy.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store")
			s := openFileStore(t, path, file.Fsync(policy))
			meta := testkit.MetaRecords()
			a, b := renumber(1, meta), renumber(uint64(len(meta))+1, seqRecs(1, recs("x", "y")))
			frames := []broker.Frame{frameOf(t, 1, a), frameOf(t, uint64(len(meta))+1, b)}
			require.NoError(t, s.AppendFrames("t", "p", 1, frames))
			for _, fr := range frames {
				clear(fr.Records) // the frames' memory is the caller's again
			}
			want := append(renumber(1, testkit.MetaRecords()), renumber(uint64(len(meta))+1, seqRecs(1, recs("x", "y")))...)
			testkit.RequireSameRecords(t, want, scanRecords(t, s, "t", "p"))
			require.NoError(t, s.Append("t", "p", 1, seqRecs(uint64(len(want))+1, recs("z"))))
			assert.Equal(t, uint64(len(want)+1), s.Stats().Records)
			require.NoError(t, s.Close())

			s = openFileStore(t, path)
			defer s.Close()
			want = append(want, seqRecs(uint64(len(want))+1, recs("z"))...)
			testkit.RequireSameRecords(t, want, scanRecords(t, s, "t", "p"))
			last, err := lastSeq(s, "t", "p")
			require.NoError(t, err)
			assert.Equal(t, uint64(len(want)), last)
		})
	}
}

// TestAppendFramesRefuses: AppendFrames refuses what Append refuses (a
// fenced epoch, a first sequence ID not above the stored last, sequence IDs
// that do not increase from frame to frame), and a frame whose records
// block is not what it says; each time nothing of the call is stored, not
// even its good frames, and the store goes on.
func TestAppendFramesRefuses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	s := openFileStore(t, path)
	require.NoError(t, s.Fence("p", 2))
	good := func(first uint64, n int) broker.Frame {
		ps := make([]string, n)
		for i := range ps {
			ps[i] = string(payload(0, first+uint64(i)))
		}
		return frameOf(t, first, seqRecs(first, recs(ps...)))
	}
	require.NoError(t, s.AppendFrames("t", "p", 2, []broker.Frame{good(1, 3)}))

	cut := good(6, 2)
	cut.Records = cut.Records[:len(cut.Records)-1]
	// A record of unknown flags, and one whose key runs past its end:
	// lengths that add up, so only reading the metadata finds them.
	badFlags := broker.Frame{FirstSeq: 6, Count: 1, Records: []byte{0, 0x80}}
	badKey := broker.Frame{FirstSeq: 6, Count: 1, Records: []byte{2, 1, 9, 'a'}}
	cases := []struct {
		name   string
		topic  string
		epoch  uint64
		frames []broker.Frame
		is     error
	}{
		{"fenced", "t", 1, []broker.Frame{good(4, 2)}, broker.ErrFenced},
		{"not above the last stored", "t", 2, []broker.Frame{good(3, 2)}, nil},
		{"frames out of order", "t", 2, []broker.Frame{good(4, 3), good(6, 2)}, nil},
		{"a frame cut short", "t", 2, []broker.Frame{good(4, 2), cut}, nil},
		{"a record more than the block holds", "t", 2, []broker.Frame{good(4, 2), {FirstSeq: 6, Count: 3, Records: good(6, 2).Records}}, nil},
		{"no records", "t", 2, []broker.Frame{good(4, 2), {FirstSeq: 6}}, nil},
		{"a count no block could hold", "t", 2, []broker.Frame{{FirstSeq: 4, Count: math.MaxInt, Records: good(4, 2).Records}}, nil},
		{"unknown record flags", "t", 2, []broker.Frame{good(4, 2), badFlags}, wire.ErrMalformed},
		{"a key past its record", "t", 2, []broker.Frame{good(4, 2), badKey}, wire.ErrMalformed},
		{"a topic of 256 bytes", strings.Repeat("t", 256), 2, []broker.Frame{good(1, 2)}, nil},
	}
	for _, c := range cases {
		err := s.AppendFrames(c.topic, "p", c.epoch, c.frames)
		require.Error(t, err, c.name)
		if c.is != nil {
			require.ErrorIs(t, err, c.is, c.name)
		}
		assert.Contains(t, err.Error(), "Store.AppendFrames", c.name)
		last, err := lastSeq(s, "t", "p")
		require.NoError(t, err)
		require.Equal(t, uint64(3), last, "%s: stored something", c.name)
	}
	require.NoError(t, s.AppendFrames("t", "p", 2, []broker.Frame{good(4, 2), good(6, 2)}))
	require.NoError(t, s.Close())

	s = openFileStore(t, path)
	defer s.Close()
	got := scanRecords(t, s, "t", "p")
	require.Len(t, got, 7)
	for i, r := range got {
		assert.Equal(t, uint64(i+1), r.Seq)
		assert.Equal(t, string(payload(0, r.Seq)), string(r.Payload))
	}
}

// TestAppendRefusesBadRaw: Append refuses a record whose Raw replay could
// not read, as AppendFrames does, and writes nothing of the call.
func TestAppendRefusesBadRaw(t *testing.T) {
	s := openFileStore(t, filepath.Join(t.TempDir(), "store"))
	defer s.Close()
	ok := broker.Record{Seq: 1, Payload: []byte("a"), Raw: []byte{0, 'a'}, FrameStart: true}
	for name, raw := range map[string][]byte{
		"no flags byte":       {},
		"unknown flags":       {0x80, 'b'},
		"a key past its end":  {1, 9, 'b'},
		"headers flag, empty": {2, 0},
	} {
		bad := broker.Record{Seq: 2, Payload: []byte("b"), Raw: raw}
		err := s.Append("t", "p", 0, []broker.Record{ok, bad})
		require.ErrorIs(t, err, wire.ErrMalformed, name)
		last, err := lastSeq(s, "t", "p")
		require.NoError(t, err)
		require.Zero(t, last, "%s: stored something", name)
	}
	require.NoError(t, s.Append("t", "p", 0, []broker.Record{ok}))
}

// TestAppendFramesReadOnlyAndClosed: a read-only store and a closed one
// refuse AppendFrames as they refuse Append.
func TestAppendFramesReadOnlyAndClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	s := openFileStore(t, path)
	frames := []broker.Frame{frameOf(t, 1, seqRecs(1, recs("a")))}
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.AppendFrames("t", "p", 0, frames), broker.ErrStoreClosed)

	ro := openFileStore(t, path, file.ReadOnly())
	defer ro.Close()
	require.ErrorIs(t, ro.AppendFrames("t", "p", 0, frames), file.ErrReadOnly)
}

// TestFramesThroughACut: a producer over a broker on a file store (which
// takes frames) loses the receipts of stored records, is cut off, sends
// more meanwhile and reconnects: every record is stored once, as sent.
// (The reconnected producer learns from the topic's TOPIC_OK what is
// stored and resends none of it; frames that begin with stored records are
// TestFrameAppenderTakesFrames' in the broker.)
func TestFramesThroughACut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	fs := openFileStore(t, path)
	defer fs.Close()
	b, err := broker.New(fs)
	require.NoError(t, err)
	d := mem.NewDialer(b)
	p, _ := testkit.NewProducer(t, d, d.Close, "p", core.SendTimeout(10*time.Second))
	ctx := context.Background()
	msg := func(i int) *core.Message { return &core.Message{Payload: payload(0, uint64(i))} }
	for i := 1; i <= 10; i++ {
		_, err := p.Send(ctx, msg(i))
		require.NoError(t, err)
	}

	d.DropReceipts(true) // 11..20 are stored, the producer never hears of it
	done := make(chan error, 25)
	cb := func(_ core.MessageID, _ *core.Message, err error) { done <- err }
	for i := 11; i <= 20; i++ {
		require.NoError(t, p.SendAsync(ctx, msg(i), cb))
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		last, err := lastSeq(fs, dflt, "p")
		require.NoError(t, err)
		if last == 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stored up to %d, want 20", last)
		}
		time.Sleep(time.Millisecond)
	}
	d.RefuseDials(true)
	d.DropConnections()
	for i := 21; i <= 25; i++ { // queued behind the unacknowledged 11..20
		require.NoError(t, p.SendAsync(ctx, msg(i), cb))
	}
	d.DropReceipts(false)
	d.RefuseDials(false)
	for range 15 {
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("a callback did not come")
		}
	}
	got := scanRecords(t, fs, dflt, "p")
	require.Len(t, got, 25)
	for i, r := range got {
		assert.Equal(t, uint64(i+1), r.Seq)
		assert.Equal(t, string(payload(0, r.Seq)), string(r.Payload))
	}
	assert.Zero(t, b.Stats().Duplicates)
}

// FuzzAppendFrames gives AppendFrames a records block of arbitrary bytes
// and a count: it must not panic, and either refuse it, storing nothing,
// or store exactly the records wire.RecordIter and wire.RecordReader read
// from it, which a reopened store reads back the same, with no damage.
func FuzzAppendFrames(f *testing.F) {
	var bb wire.BatchBuilder
	bb.Reset(nil, 0, 1)
	bb.Add([]byte("plain"))
	bb.AddRecord([]byte("meta"), []byte("k"), []wire.Header{{Key: "h", Value: []byte("v")}}, time.Unix(1, 2))
	bb.Add(nil)
	good, err := wire.DecodeBatch(bb.Finish())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint16(3), good.Data)
	f.Add(uint16(2), good.Data)
	f.Add(uint16(1), []byte{0, 0x80})
	f.Add(uint16(1), []byte{2, 1, 9, 'a'})
	f.Add(uint16(0), []byte{})
	f.Fuzz(func(t *testing.T, count uint16, block []byte) {
		path := filepath.Join(t.TempDir(), "store")
		s := openFileStore(t, path, file.Fsync(file.FsyncNone))
		defer func() { _ = s.Close() }() // the one open at the end
		var want []broker.Record
		if it := wire.NewRecordIter(block, uint32(count)); count > 0 {
			for raw, ok := it.Next(); ok; raw, ok = it.Next() {
				var rr wire.RecordReader
				r, err := rr.Read(raw)
				if err != nil {
					want = nil
					break
				}
				want = append(want, broker.Record{Seq: uint64(len(want) + 1), Payload: r.Payload, Key: r.Key, Headers: r.Headers, EventTime: r.EventTime})
			}
			if it.Err() != nil {
				want = nil
			}
		}
		err := s.AppendFrames("t", "p", 0, []broker.Frame{{FirstSeq: 1, Count: int(count), Records: block}})
		if (err == nil) != (want != nil) {
			t.Fatalf("AppendFrames: %v; the block holds %d readable records of %d", err, len(want), count)
		}
		if err != nil {
			last, lerr := lastSeq(s, "t", "p")
			require.NoError(t, lerr)
			require.Zero(t, last, "refused, yet stored")
			return
		}
		testkit.RequireSameRecords(t, want, scanRecords(t, s, "t", "p"))
		require.NoError(t, s.Close())
		s = openFileStore(t, path, file.Fsync(file.FsyncNone))
		testkit.RequireSameRecords(t, want, scanRecords(t, s, "t", "p"))
	})
}
