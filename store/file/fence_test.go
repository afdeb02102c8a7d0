package file_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/store/file"
)

// TestFence: a fence needs an epoch above the stored one and is fsynced
// before it returns, whatever the policy; an Append of a lower epoch is
// refused; both survive a reopen; Scan and Verify skip fence entries.
func TestFence(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	counts := &file.FileCounts{}
	s := openFileStore(t, path, file.Fsync(file.FsyncNone), file.WithCounts(counts))
	last, err := s.FenceTopic(dflt, "p", 1)
	require.NoError(t, err)
	assert.Zero(t, last)
	_, syncs := counts.Counts()
	assert.Equal(t, 2, syncs, "the header at creation, then the fence: fsynced under FsyncNone too")
	require.ErrorIs(t, s.Append(dflt, "p", 0, seqRecs(1, recs("old"))), broker.ErrFenced)
	require.NoError(t, s.Append(dflt, "p", 1, seqRecs(1, recs("a", "b"))))
	_, err = s.FenceTopic(dflt, "p", 1)
	require.ErrorIs(t, err, broker.ErrFenced)
	last, err = s.FenceTopic(dflt, "p", 3)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), last)
	require.ErrorIs(t, s.Append(dflt, "p", 2, seqRecs(3, recs("fenced"))), broker.ErrFenced)
	_, err = s.FenceTopic("eu.orders", "p", 7) // a name fenced and never written
	require.NoError(t, err)
	require.NoError(t, s.Append(dflt, "p", 3, seqRecs(3, recs("c"))))
	require.NoError(t, s.Close())

	for _, opts := range [][]file.Option{nil, {file.ReadOnly()}} {
		s = openFileStore(t, path, opts...)
		for _, tc := range []struct {
			topic string
			want  broker.NameState
		}{{dflt, broker.NameState{LastSeq: 3, Epoch: 3}}, {"eu.orders", broker.NameState{Epoch: 7}}} {
			st, err := s.State(tc.topic, "p")
			require.NoError(t, err)
			assert.Equal(t, tc.want, st, tc.topic)
		}
		assert.Equal(t, 2, s.Recovery().Entries, "record entries")
		assert.Equal(t, []fileRec{{"p", 1, "a"}, {"p", 2, "b"}, {"p", 3, "c"}}, fileScanAll(t, s))
		require.NoError(t, s.Verify())
		require.NoError(t, s.Close())
	}
	s = openFileStore(t, path, file.ReadOnly())
	_, err = s.FenceTopic(dflt, "p", 9)
	require.ErrorIs(t, err, file.ErrReadOnly)
	require.NoError(t, s.Close())
}

// TestFenceInSnapshot: a roll's snapshot carries every name's epoch, those
// fenced without a record too, so that a name's epoch outlives the segment
// that holds its fence entry when retention removes it.
func TestFenceInSnapshot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	opts := []file.Option{file.SegmentBytes(testSegment), file.RetainBytes(3 * testSegment), file.Fsync(file.FsyncNone)}
	s := openFileStore(t, path, opts...)
	_, err := s.FenceTopic(dflt, "fenced-only", 4)
	require.NoError(t, err)
	_, err = s.FenceTopic(dflt, "p0", 2)
	require.NoError(t, err)
	for _, c := range segmentCalls(300, 2) {
		epoch := uint64(0)
		if c.producer == "p0" {
			epoch = 2
		}
		require.NoError(t, s.Append(dflt, c.producer, epoch, seqRecs(c.first, c.records())))
	}
	require.NoError(t, s.Close())
	_, err = os.Stat(path + ".00000000000000000001")
	require.ErrorIs(t, err, os.ErrNotExist, "the segment with the fence entries was removed")

	s = openFileStore(t, path, opts...)
	defer s.Close()
	for name, want := range map[string]uint64{"fenced-only": 4, "p0": 2, "p1": 0} {
		st, err := s.State(dflt, name)
		require.NoError(t, err)
		assert.Equal(t, want, st.Epoch, name)
	}
	require.ErrorIs(t, s.Append(dflt, "p0", 1, seqRecs(1000, recs("stale"))), broker.ErrFenced)
}

// TestOpensVersions2And3: a store written before epochs opens (its header
// is upgraded, 2 to 4 and a rolled segment's 3 to 5, so that an older
// inflight refuses the file once it may hold a fence entry), keeps its
// producers' last sequence IDs, and fences from then on.
func TestOpensVersions2And3(t *testing.T) {
	for _, tc := range []struct {
		version, upgraded byte
		rolled            bool
	}{{2, 4, false}, {3, 5, true}} {
		path := filepath.Join(t.TempDir(), "store")
		var opts []file.Option
		if tc.rolled {
			opts = append(opts, file.SegmentBytes(testSegment))
		}
		s := openFileStore(t, path, append(opts, file.Fsync(file.FsyncNone))...)
		fileAppendAll(t, s, segmentCalls(60, 2))
		require.NoError(t, s.Close())
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Equal(t, tc.upgraded, data[7])
		data[7] = tc.version
		if tc.rolled {
			data = append(data[:8], toV3Snapshot(t, data[8:])...)
		}
		require.NoError(t, os.WriteFile(path, data, 0o600))

		s = openFileStore(t, path, opts...)
		assert.Equal(t, int(tc.version), s.Recovery().UpgradedFrom)
		want, last := fileWant(segmentCalls(60, 2))
		for name, seq := range last {
			have, err := s.LastSeq(dflt, name)
			require.NoError(t, err)
			assert.Equal(t, seq, have, "LastSeq(%q)", name)
		}
		_, err = s.FenceTopic(dflt, "p0", 1)
		require.NoError(t, err)
		require.NoError(t, s.Close())
		data, err = os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, tc.upgraded, data[7], "the header after the upgrade")

		s = openFileStore(t, path, opts...)
		assert.Zero(t, s.Recovery().UpgradedFrom)
		st, err := s.State(dflt, "p0")
		require.NoError(t, err)
		assert.Equal(t, broker.NameState{LastSeq: last["p0"], Epoch: 1}, st)
		got := fileScanAll(t, s)
		assert.Equal(t, want[len(want)-len(got):], got)
		require.NoError(t, s.Close())
	}
}

// toV3Snapshot rewrites the snapshot that starts a rolled segment's entries
// (with epochs) as a version 3 store wrote it (without), keeping what
// follows.
func toV3Snapshot(t testing.TB, seg []byte) []byte {
	t.Helper()
	n := binary.BigEndian.Uint32(seg)
	body := seg[8 : 8+n]
	require.Equal(t, byte(2), body[0], "a snapshot with epochs")
	out := append([]byte{1}, body[1:13]...)
	p := body[13:]
	for range binary.BigEndian.Uint32(body[9:]) {
		k := 1 + int(p[0])
		k += 1 + int(p[k])
		require.Zero(t, binary.BigEndian.Uint64(p[k+16:]), "no epoch before epochs")
		out = append(out, p[:k+16]...)
		p = p[k+24:]
	}
	return append(fileEntry(out), seg[8+n:]...)
}
