package file_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/store/file"
)

const testSegment = 4 << 10 // the smallest SegmentBytes

// waitTimeout bounds every wait on an event in these tests; hitting it
// fails the test.
const waitTimeout = 10 * time.Second

// segmentCalls returns n Appends of 1 to 3 records of 100 bytes for
// producers p0..p(producers-1), sequence IDs increasing per producer.
func segmentCalls(n, producers int) []fileCall {
	next := make([]uint64, producers)
	var calls []fileCall
	for i := range n {
		k := i % producers
		c := fileCall{producer: fmt.Sprint("p", k), first: next[k] + 1}
		for j := range 1 + i%3 {
			c.payloads = append(c.payloads, fmt.Sprintf("%03d-%d-%s", i, j, strings.Repeat("x", 94)))
		}
		next[k] += uint64(len(c.payloads))
		calls = append(calls, c)
	}
	return calls
}

// totalBytes is the size of every segment of s.
func totalBytes(s *file.Store) int64 {
	var n int64
	for _, seg := range s.Segments() {
		n += seg.Bytes
	}
	return n
}

// TestSegments: appends roll the store into sealed segments of at
// most SegmentBytes; Scan reads them all in order; a reopen replays the
// active segment only and still knows every producer's last sequence ID.
func TestSegments(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	s := openFileStore(t, path, file.SegmentBytes(testSegment), file.Fsync(file.FsyncNone))
	calls := segmentCalls(300, 5)
	fileAppendAll(t, s, calls)
	segs := s.Segments()
	require.Greater(t, len(segs), 10, "300 entries of ~200 bytes in 4 KiB segments")
	for i, seg := range segs {
		assert.LessOrEqual(t, seg.Bytes, int64(testSegment+512), "segment %d: at most the limit and the snapshot", i)
		st, err := os.Stat(seg.Path)
		require.NoError(t, err)
		assert.Equal(t, seg.Bytes, st.Size(), "segment %d", i)
		if i < len(segs)-1 {
			assert.Equal(t, fmt.Sprintf("%s.%020d", path, i+1), seg.Path)
			assert.False(t, seg.Written.IsZero())
		} else {
			assert.Equal(t, path, seg.Path)
		}
	}
	checkFileStore(t, s, calls)
	require.NoError(t, s.Close())

	s = openFileStore(t, path, file.SegmentBytes(testSegment))
	defer s.Close()
	rec := s.Recovery()
	assert.Equal(t, len(segs)-1, rec.Sealed)
	assert.Less(t, rec.Records, 40, "only the active segment is replayed")
	checkFileStore(t, s, calls)

	// Appends go on where they were; a stale sequence ID is still refused
	// for a producer whose last records are all in sealed segments.
	more := segmentCalls(330, 5)[300:]
	fileAppendAll(t, s, more)
	assert.Error(t, s.Append(dflt, "p0", 0, seqRecs(1, recs("stale"))))
	checkFileStore(t, s, append(calls, more...))
	require.NoError(t, s.Verify())
}

// TestBigEntryGetsItsOwnSegment: an entry over SegmentBytes is
// written whole, in a segment of its own.
func TestBigEntryGetsItsOwnSegment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	s := openFileStore(t, path, file.SegmentBytes(testSegment), file.Fsync(file.FsyncNone))
	defer s.Close()
	calls := []fileCall{
		{"a", 1, []string{"small"}},
		{"a", 2, []string{strings.Repeat("b", 3*testSegment)}},
		{"a", 3, []string{"small again"}},
	}
	fileAppendAll(t, s, calls)
	segs := s.Segments()
	require.Len(t, segs, 3)
	assert.Greater(t, segs[1].Bytes, int64(3*testSegment))
	checkFileStore(t, s, calls)
}

// TestRetention: RetainBytes and RetainAge remove the oldest sealed
// segments, never the active one; the records left read back in order,
// and every producer's last sequence ID outlives its records.
func TestRetention(t *testing.T) {
	t.Run("Bytes", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "store")
		const limit = 5 * testSegment
		s := openFileStore(t, path, file.SegmentBytes(testSegment), file.RetainBytes(limit), file.Fsync(file.FsyncNone))
		defer s.Close()
		calls := segmentCalls(400, 4)
		for i, c := range calls {
			require.NoError(t, s.Append(dflt, c.producer, 0, seqRecs(c.first, c.records())))
			require.LessOrEqual(t, totalBytes(s), int64(limit+testSegment), "after append %d", i)
		}
		segs := s.Segments()
		first := segs[0].Path
		assert.NotEqual(t, path+".00000000000000000001", first, "the oldest segments are gone")
		_, err := os.Stat(path + ".00000000000000000001")
		assert.ErrorIs(t, err, os.ErrNotExist)

		// What is left is a suffix of what was written, in order.
		want, last := fileWant(calls)
		got := fileScanAll(t, s)
		require.NotEmpty(t, got)
		require.Less(t, len(got), len(want))
		assert.Equal(t, want[len(want)-len(got):], got)
		for name, seq := range last {
			have, err := lastSeq(s, dflt, name)
			require.NoError(t, err)
			assert.Equal(t, seq, have, "LastSeq(%q)", name)
		}
		// A resend of a removed record is still recognized.
		assert.Error(t, s.Append(dflt, "p0", 0, seqRecs(1, recs("resent"))))
	})

	t.Run("AgeAtOpen", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "store")
		s := openFileStore(t, path, file.SegmentBytes(testSegment), file.Fsync(file.FsyncNone))
		calls := segmentCalls(200, 3)
		fileAppendAll(t, s, calls)
		segs := s.Segments()
		require.NoError(t, s.Close())
		require.Greater(t, len(segs), 4)

		// The first three sealed segments were sealed two days ago, the
		// rest an hour ago.
		now := time.Now()
		for i, seg := range segs[:len(segs)-1] {
			at := now.Add(-time.Hour)
			if i < 3 {
				at = now.Add(-48 * time.Hour)
			}
			require.NoError(t, os.Chtimes(seg.Path, at, at))
		}
		s = openFileStore(t, path, file.SegmentBytes(testSegment), file.RetainAge(24*time.Hour),
			file.WithNow(func() time.Time { return now }))
		defer s.Close()
		assert.Equal(t, 3, s.Recovery().Removed)
		var kept []string
		for _, seg := range s.Segments() {
			kept = append(kept, seg.Path)
		}
		for i, seg := range segs[3:] {
			assert.Equal(t, seg.Path, kept[i])
		}
		want, last := fileWant(calls)
		got := fileScanAll(t, s)
		assert.Equal(t, want[len(want)-len(got):], got)
		for name, seq := range last {
			have, err := lastSeq(s, dflt, name)
			require.NoError(t, err)
			assert.Equal(t, seq, have)
		}
	})

	t.Run("AgeWhileIdle", func(t *testing.T) {
		// Nobody appends: the maintenance goroutine still removes what
		// ages out.
		path := filepath.Join(t.TempDir(), "store")
		var mu sync.Mutex
		now := time.Now()
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		s := openFileStore(t, path, file.SegmentBytes(testSegment), file.Fsync(file.FsyncNone),
			file.RetainAge(100*time.Millisecond), file.WithNow(clock)) // looked at every 10ms
		defer s.Close()
		fileAppendAll(t, s, segmentCalls(100, 2))
		sealed := len(s.Segments()) - 1
		require.Positive(t, sealed)
		mu.Lock()
		now = now.Add(2 * time.Minute)
		mu.Unlock()
		deadline := time.Now().Add(waitTimeout)
		for len(s.Segments()) > 1 {
			require.True(t, time.Now().Before(deadline), "sealed segments still there: %d", len(s.Segments())-1)
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// TestRollInterrupted: each state a crash can leave in the middle
// of a roll opens with every record and goes on rolling.
func TestRollInterrupted(t *testing.T) {
	setup := func(t *testing.T) (string, []fileCall) {
		path := filepath.Join(t.TempDir(), "store")
		s := openFileStore(t, path, file.SegmentBytes(testSegment), file.Fsync(file.FsyncNone))
		calls := segmentCalls(60, 2)
		fileAppendAll(t, s, calls)
		require.NoError(t, s.Close())
		return path, calls
	}
	reopen := func(t *testing.T, path string, calls []fileCall, sealed int) {
		s := openFileStore(t, path, file.SegmentBytes(testSegment))
		defer s.Close()
		assert.Equal(t, sealed, s.Recovery().Sealed)
		checkFileStore(t, s, calls)
		_, err := os.Stat(path + ".next")
		assert.ErrorIs(t, err, os.ErrNotExist, "the leftover is removed")
		more := segmentCalls(120, 2)[60:]
		fileAppendAll(t, s, more)
		checkFileStore(t, s, append(calls, more...))
		require.NoError(t, s.Verify())
	}
	t.Run("NewSegmentWritten", func(t *testing.T) {
		path, calls := setup(t)
		sealed := len(listSegments(t, path))
		// Step 2 done, or half done: PATH.next holds a header and a
		// snapshot, or less.
		require.NoError(t, os.WriteFile(path+".next", []byte("IFLT\x00\x00\x00\x03\x00\x00"), 0o600))
		reopen(t, path, calls, sealed)
	})
	t.Run("Sealed", func(t *testing.T) {
		path, calls := setup(t)
		segs := listSegments(t, path)
		// Step 3 done: the active segment is also linked as the next sealed one.
		require.NoError(t, os.Link(path, fmt.Sprintf("%s.%020d", path, len(segs)+1)))
		require.NoError(t, os.WriteFile(path+".next", []byte("IFLT\x00\x00\x00\x03"), 0o600))
		reopen(t, path, calls, len(segs))
	})
	t.Run("SealedMissing", func(t *testing.T) {
		// A hole is what a retention a crash interrupted leaves (see
		// TestRetentionGapIsPrefix): the segments before it go too.
		path, _ := setup(t)
		segs := listSegments(t, path)
		require.Greater(t, len(segs), 2)
		require.NoError(t, os.Remove(segs[1]))
		s, err := file.Open(path)
		require.NoError(t, err)
		assert.Equal(t, 1, s.Recovery().Removed)
		require.NoError(t, s.Close())
		_, err = os.Stat(segs[0])
		require.ErrorIs(t, err, os.ErrNotExist)
	})
	t.Run("ActiveMissing", func(t *testing.T) {
		path, _ := setup(t)
		require.NoError(t, os.Remove(path))
		_, err := file.Open(path)
		require.ErrorIs(t, err, file.ErrCorrupt, "a new empty store would forget the producers")
		_, err = os.Stat(path)
		assert.ErrorIs(t, err, os.ErrNotExist, "nothing created")
	})
}

// listSegments returns the sealed segment files beside path.
func listSegments(t *testing.T, path string) []string {
	t.Helper()
	m, err := filepath.Glob(path + ".????????????????????")
	require.NoError(t, err)
	return m
}

// TestBitFlipInSealedSegment is a property test over single bit
// flips in sealed segments, which Open does not read: the store
// opens with no file changed and every producer's last sequence ID, Verify
// and Scan report the damage with the segment's name, and Scan returns
// every record before it unchanged.
func TestBitFlipInSealedSegment(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 3))
	dir := t.TempDir()
	ref := filepath.Join(dir, "ref")
	s := openFileStore(t, ref, file.SegmentBytes(testSegment), file.Fsync(file.FsyncNone))
	calls := segmentCalls(150, 3)
	fileAppendAll(t, s, calls)
	segs := s.Segments()
	require.NoError(t, s.Close())
	want, last := fileWant(calls)

	for range 150 {
		victim := rng.IntN(len(segs) - 1)
		data, err := os.ReadFile(segs[victim].Path)
		require.NoError(t, err)
		at := rng.IntN(len(data))
		data[at] ^= 1 << rng.IntN(8)

		store := filepath.Join(t.TempDir(), "store")
		for i, seg := range segs {
			b, err := os.ReadFile(seg.Path)
			require.NoError(t, err)
			if i == victim {
				b = data
			}
			require.NoError(t, os.WriteFile(store+strings.TrimPrefix(seg.Path, ref), b, 0o600))
		}
		damaged := filepath.Join(filepath.Dir(store), filepath.Base(store)+strings.TrimPrefix(segs[victim].Path, ref))

		s := openFileStore(t, store, file.SegmentBytes(testSegment))
		for name, seq := range last {
			have, err := lastSeq(s, dflt, name)
			require.NoError(t, err)
			require.Equal(t, seq, have, "flip at %d of segment %d", at, victim)
		}
		err = s.Verify()
		var ce *file.CorruptError
		require.ErrorAs(t, err, &ce, "flip at %d of segment %d", at, victim)
		assert.Equal(t, damaged, ce.Path)
		assert.True(t, ce.Sealed)
		assert.Contains(t, err.Error(), "corrupt")

		var got []fileRec
		err = s.Scan(func(_, producer string, r broker.Record) error {
			got = append(got, fileRec{producer, r.Seq, string(r.Payload)})
			return nil
		})
		require.ErrorIs(t, err, file.ErrCorrupt)
		require.Equal(t, want[:len(got)], got, "records before the damage")
		require.NoError(t, s.Close())
		now, err := os.ReadFile(damaged)
		require.NoError(t, err)
		require.Equal(t, data, now, "a damaged sealed segment stays as it is")
	}
}

// TestRepairTakesTheSnapshot: damage in the active segment's
// snapshot is corruption; Repair moves it aside and rebuilds every
// producer's last sequence ID from the sealed segments.
func TestRepairTakesTheSnapshot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	s := openFileStore(t, path, file.SegmentBytes(testSegment), file.Fsync(file.FsyncNone))
	calls := segmentCalls(100, 3)
	fileAppendAll(t, s, calls)
	require.NoError(t, s.Close())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "IFLT\x00\x00\x00\x07", string(data[:8]))
	data[8+8+3] ^= 0x10 // in the snapshot's body
	require.NoError(t, os.WriteFile(path, data, 0o600))

	_, err = file.Open(path)
	var ce *file.CorruptError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, int64(8), ce.Offset)

	s = openFileStore(t, path, file.SegmentBytes(testSegment), file.Repair())
	defer s.Close()
	side, err := os.ReadFile(s.Recovery().SideFile)
	require.NoError(t, err)
	assert.Equal(t, data[8:], side, "everything after the header is in the side file")
	// The producers' last sequence IDs are those of the sealed segments
	// (the records of the active segment are in the side file).
	wantRecs, _ := fileWant(calls)
	got := fileScanAll(t, s)
	require.Equal(t, wantRecs[:len(got)], got)
	lastSealed := map[string]uint64{}
	for _, r := range got {
		lastSealed[r.Producer] = r.Seq
	}
	for name, seq := range lastSealed {
		have, err := lastSeq(s, dflt, name)
		require.NoError(t, err)
		assert.Equal(t, seq, have, "LastSeq(%q)", name)
	}
	require.NoError(t, s.Append(dflt, "p0", 0, seqRecs(lastSealed["p0"]+1000, recs("after"))))
	require.NoError(t, s.Close())
	s2 := openFileStore(t, path)
	defer s2.Close()
	have, err := lastSeq(s2, dflt, "p0")
	require.NoError(t, err)
	assert.Equal(t, lastSealed["p0"]+1000, have)
}

// TestRollUnderLoad: concurrent Appends under FsyncBatch (sharing
// fsyncs across rolls) and concurrent Scans: every record once, in order
// per producer.
func TestRollUnderLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	s := openFileStore(t, path, file.SegmentBytes(testSegment))
	const producers, per = 4, 150
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range per {
				payload := bytes.Repeat([]byte{byte(p)}, 50+i%100)
				if err := s.Append(dflt, fmt.Sprint("w", p), 0, seqRecs(uint64(i+1), [][]byte{payload})); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	stop := make(chan struct{})
	var scans sync.WaitGroup
	scans.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			next := map[string]uint64{}
			if err := s.Scan(func(_, producer string, r broker.Record) error {
				if r.Seq != next[producer]+1 {
					return fmt.Errorf("%s: seq %d after %d", producer, r.Seq, next[producer])
				}
				next[producer] = r.Seq
				return nil
			}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	close(stop)
	scans.Wait()
	assert.Greater(t, len(s.Segments()), 5)
	require.NoError(t, s.Close())
	s = openFileStore(t, path)
	defer s.Close()
	n := map[string]uint64{}
	require.NoError(t, s.Scan(func(_, producer string, r broker.Record) error {
		n[producer]++
		require.Equal(t, n[producer], r.Seq)
		return nil
	}))
	for p := range producers {
		assert.Equal(t, uint64(per), n[fmt.Sprint("w", p)])
	}
}

// TestRollFails: a full disk while a roll writes the new segment
// fails the store for good (ErrStoreFailed, the cause wrapped); reopening
// it finds every acknowledged record and rolls again.
func TestRollFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	var faults file.FileFaults
	s := openFileStore(t, path, file.SegmentBytes(testSegment), file.WithFaults(&faults))
	calls := segmentCalls(15, 1) // under one segment
	fileAppendAll(t, s, calls)
	require.Len(t, s.Segments(), 1)
	faults.Set(syscall.ENOSPC, nil)
	big := fileCall{"p0", calls[len(calls)-1].first + 10, []string{strings.Repeat("b", testSegment)}}
	err := s.Append(dflt, big.producer, 0, seqRecs(big.first, big.records()))
	require.ErrorIs(t, err, broker.ErrStoreFailed)
	require.ErrorIs(t, err, syscall.ENOSPC)
	_, err = lastSeq(s, dflt, "p0")
	require.ErrorIs(t, err, broker.ErrStoreFailed, "sticky")
	require.NoError(t, s.Close())

	s = openFileStore(t, path, file.SegmentBytes(testSegment))
	defer s.Close()
	checkFileStore(t, s, calls)
	fileAppendAll(t, s, []fileCall{big})
	checkFileStore(t, s, append(calls, big))
	assert.Len(t, s.Segments(), 2)
}

// scanSeqs returns the sequence IDs Scan reads for each producer of s.
func scanSeqs(t *testing.T, s *file.Store) (map[string][]uint64, error) {
	t.Helper()
	out := map[string][]uint64{}
	err := s.Scan(func(_, producer string, r broker.Record) error {
		out[producer] = append(out[producer], r.Seq)
		return nil
	})
	return out, err
}

// TestReaderDuringRolls: readers (ReadOnly) opened while a writer
// rolls all the time each see a prefix of what was written, every record
// once, in order.
func TestReaderDuringRolls(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	s := openFileStore(t, path, file.SegmentBytes(testSegment), file.Fsync(file.FsyncNone))
	defer s.Close()
	require.NoError(t, s.Append(dflt, "p", 0, seqRecs(1, recs("first"))))
	const appends = 2000 // 400 bytes each: a roll every 10 or so
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		payload := strings.Repeat("x", 400)
		for seq := uint64(2); seq <= appends; seq++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := s.Append(dflt, "p", 0, seqRecs(seq, recs(payload))); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	defer func() { close(stop); <-done }()
	// Readers open and read the whole store for as long as the writer
	// writes, and at least 20 of them.
	deadline := time.Now().Add(waitTimeout)
	writing := func() bool {
		select {
		case <-done:
			return false
		default:
			return true
		}
	}
	readers := 0
	for ; writing() || readers < 20; readers++ {
		require.True(t, time.Now().Before(deadline), "%d readers in %v", readers, waitTimeout)
		r, err := file.Open(path, file.ReadOnly())
		require.NoError(t, err, "reader %d", readers)
		seqs, err := scanSeqs(t, r)
		require.NoError(t, err, "reader %d", readers)
		require.NoError(t, r.Close())
		for j, seq := range seqs["p"] {
			require.Equal(t, uint64(j+1), seq, "reader %d: record %d", readers, j)
		}
	}
	assert.Greater(t, len(s.Segments()), 100, "the writer rolled")
	t.Logf("%d readers while the writer rolled %d times", readers, len(s.Segments())-1)
}

// TestReaderMidRoll: a reader of a store left between the link and
// the rename of a roll (a writer mid-roll, or a crash there) reads the
// active segment once.
func TestReaderMidRoll(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	s := openFileStore(t, path, file.SegmentBytes(testSegment), file.Fsync(file.FsyncNone))
	calls := segmentCalls(100, 3)
	fileAppendAll(t, s, calls)
	sealed := len(s.Segments()) - 1
	require.NoError(t, s.Close())
	require.NoError(t, os.Link(path, fmt.Sprintf("%s.%020d", path, sealed+1)))
	r := openFileStore(t, path, file.ReadOnly())
	defer r.Close()
	checkFileStore(t, r, calls)
}

// TestShortActiveWithSealed: an active segment cut below its
// header while sealed segments exist (outside damage: a roll writes it
// whole first) is refused, not taken as a new store that forgets every
// producer; Repair rebuilds its snapshot from the sealed segments.
func TestShortActiveWithSealed(t *testing.T) {
	for _, size := range []int64{0, 5} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store")
			s := openFileStore(t, path, file.SegmentBytes(testSegment), file.Fsync(file.FsyncNone))
			calls := segmentCalls(100, 3)
			fileAppendAll(t, s, calls)
			require.NoError(t, s.Close())
			require.NoError(t, os.Truncate(path, size))
			_, err := file.Open(path)
			require.ErrorIs(t, err, file.ErrCorrupt)
			_, err = file.Open(path, file.ReadOnly())
			require.ErrorIs(t, err, file.ErrCorrupt)

			s = openFileStore(t, path, file.Repair())
			defer s.Close()
			seqs, err := scanSeqs(t, s)
			require.NoError(t, err)
			for name, got := range seqs {
				have, err := lastSeq(s, dflt, name)
				require.NoError(t, err)
				assert.Equal(t, got[len(got)-1], have, "LastSeq(%q) from the sealed segments", name)
			}
		})
	}
}

// TestSnapshotDoesNotForceRolls: a snapshot larger than a segment
// (many producers seen) does not make every Append roll.
func TestSnapshotDoesNotForceRolls(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	s := openFileStore(t, path, file.SegmentBytes(testSegment), file.Fsync(file.FsyncNone))
	defer s.Close()
	for i := range 200 { // 200 names of 24 bytes: a snapshot of ~7 KiB
		require.NoError(t, s.Append(dflt, fmt.Sprintf("inflight-%016x", i), 0, seqRecs(1, recs("x"))))
	}
	before := len(s.Segments())
	for i := range 50 {
		require.NoError(t, s.Append(dflt, "steady", 0, seqRecs(uint64(i+1), recs("y"))))
	}
	assert.LessOrEqual(t, len(s.Segments())-before, 1, "rolls for 50 appends of one byte")
}

// TestForgetsIdleProducers: ForgetProducersAfter drops, at a roll, the
// producers idle for longer, and keeps the others across restarts (the
// snapshot carries when each last appended); opening does not forget (a
// forget is made durable by the roll's snapshot, see forgetLocked).
func TestForgetsIdleProducers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	opts := []file.Option{file.SegmentBytes(testSegment), file.Fsync(file.FsyncNone),
		file.ForgetProducersAfter(time.Hour), file.WithNow(clock)}
	last := func(s *file.Store, name string) uint64 {
		seq, err := lastSeq(s, dflt, name)
		require.NoError(t, err)
		return seq
	}
	big := strings.Repeat("z", testSegment) // an Append that rolls

	s := openFileStore(t, path, opts...)
	require.NoError(t, s.Append(dflt, "idle", 0, seqRecs(7, recs("x"))))
	require.NoError(t, s.Append(dflt, "busy", 0, seqRecs(1, recs("x"))))
	require.NoError(t, s.Append(dflt, "busy", 0, seqRecs(2, recs(big)))) // roll: both were seen just now
	advance(50 * time.Minute)
	require.NoError(t, s.Append(dflt, "busy", 0, seqRecs(3, recs(big))))
	assert.Equal(t, uint64(7), last(s, "idle"), "idle 50 minutes: kept")
	advance(20 * time.Minute)
	require.NoError(t, s.Append(dflt, "busy", 0, seqRecs(4, recs(big))))
	assert.Zero(t, last(s, "idle"), "idle 70 minutes: forgotten at the roll")
	assert.Equal(t, uint64(4), last(s, "busy"))
	// A forget raised the floor: a new name fences above it (as the
	// broker always does) before it appends.
	require.NoError(t, s.Fence("other", 2))
	require.NoError(t, s.Append(dflt, "other", 2, seqRecs(1, recs(big)))) // busy's records all sealed now
	require.NoError(t, s.Close())

	// Across a restart: busy's time comes back from the snapshot.
	s = openFileStore(t, path, opts...)
	assert.Zero(t, s.Recovery().Forgotten)
	assert.Zero(t, last(s, "idle"))
	assert.Equal(t, uint64(4), last(s, "busy"))
	require.NoError(t, s.Close())
	advance(2 * time.Hour)
	s = openFileStore(t, path, opts...)
	defer s.Close()
	assert.Zero(t, s.Recovery().Forgotten)
	assert.Equal(t, uint64(4), last(s, "busy"), "kept until the next roll")
	require.NoError(t, s.Append(dflt, "other", 2, seqRecs(2, recs(big))))
	assert.Zero(t, last(s, "busy"), "busy idle for 2 hours at the roll")
	assert.Equal(t, uint64(2), last(s, "other"), "found in the active segment: seen at open")
	// Its records are still there: only what the store knows of it went.
	seqs, err := scanSeqs(t, s)
	require.NoError(t, err)
	assert.Equal(t, []uint64{1, 2, 3, 4}, seqs["busy"])
}
