package file_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/store/file"
)

// TestScanSkipDamaged: with one bit flipped in a sealed segment and one in
// the active segment, a reader opened with ReadDamaged sees every record
// before the first damage and then the *CorruptError (Scan), or, with
// ScanSkipDamaged, every record of every segment up to its damage: the
// intact segments after the damaged one are read, each damage is reported
// once, and nothing of the files changes. Without ReadDamaged the damaged
// active segment is refused, as before.
func TestScanSkipDamaged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	s := openFileStore(t, path, file.SegmentBytes(testSegment), file.Fsync(file.FsyncNone))
	calls := segmentCalls(150, 3)
	fileAppendAll(t, s, calls)
	require.NoError(t, s.Append(dflt, "tail", 0, seqRecs(1, recs("t"))))
	segs := s.Segments()
	require.NoError(t, s.Close())
	require.Greater(t, len(segs), 4)
	want, _ := fileWant(calls)
	want = append(want, fileRec{"tail", 1, "t"})

	flip := func(p string) {
		// In an entry that has an intact one after it (the small "tail"
		// entry in the active segment): corruption, not a torn tail.
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		b[len(b)*3/4] ^= 0x10
		require.NoError(t, os.WriteFile(p, b, 0o600))
	}
	sealed, active := segs[1].Path, segs[len(segs)-1].Path
	flip(sealed)
	flip(active)
	before := testkit.ReadDir(t, filepath.Dir(path))

	_, err := file.Open(path, file.ReadOnly())
	require.ErrorIs(t, err, file.ErrCorrupt, "without ReadDamaged")
	r := openFileStore(t, path, file.ReadOnly(), file.ReadDamaged())
	defer r.Close()

	var got []fileRec
	collect := func(_, producer string, rec broker.Record) error {
		got = append(got, fileRec{producer, rec.Seq, string(rec.Payload)})
		return nil
	}
	err = r.Scan(collect)
	var ce *file.CorruptError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, sealed, ce.Path)
	assert.True(t, ce.Sealed)
	first := len(got)
	require.Equal(t, want[:first], got, "every record before the damage")

	got = nil
	var skipped []*file.CorruptError
	require.NoError(t, r.ScanSkipDamaged(collect, func(e *file.CorruptError) error {
		skipped = append(skipped, e)
		return nil
	}))
	require.Len(t, skipped, 2)
	assert.Equal(t, sealed, skipped[0].Path)
	assert.Equal(t, active, skipped[1].Path)
	assert.False(t, skipped[1].Sealed)
	require.Equal(t, want[:first], got[:first])
	rest := got[first:]
	require.NotEmpty(t, rest, "the segments after the damaged one")
	at := indexOf(want, rest[0])
	require.Greater(t, at, first, "the rest of the damaged segment is skipped")
	require.Less(t, at+len(rest), len(want), "the active segment's records after its damage are not read")
	assert.Equal(t, want[at:at+len(rest)], rest, "the intact segments, in order")

	stop := errors.New("stop")
	assert.ErrorIs(t, r.ScanSkipDamaged(collect, func(*file.CorruptError) error { return stop }), stop)
	assert.Equal(t, before, testkit.ReadDir(t, filepath.Dir(path)), "reading changes nothing")
}

func indexOf(recs []fileRec, r fileRec) int {
	for i, x := range recs {
		if x == r {
			return i
		}
	}
	return -1
}
