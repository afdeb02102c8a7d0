package file_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/store/file"
)

// TestFence: a fence needs an epoch above the name's stored one and is
// fsynced before it returns, whatever the policy; an Append of a lower
// epoch is refused on every topic of the name; both survive a reopen; Scan
// and Verify skip fence entries.
func TestFence(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	counts := &file.FileCounts{}
	s := openFileStore(t, path, file.Fsync(file.FsyncNone), file.WithCounts(counts))
	require.NoError(t, s.Fence("p", 1))
	_, syncs := counts.Counts()
	assert.Equal(t, 2, syncs, "the header at creation, then the fence: fsynced under FsyncNone too")
	require.ErrorIs(t, s.Append(dflt, "p", 0, seqRecs(1, recs("old"))), broker.ErrFenced)
	require.NoError(t, s.Append(dflt, "p", 1, seqRecs(1, recs("a", "b"))))
	require.ErrorIs(t, s.Fence("p", 1), broker.ErrFenced)
	require.NoError(t, s.Fence("p", 3))
	st, err := s.State(dflt, "p")
	require.NoError(t, err)
	assert.Equal(t, broker.NameState{LastSeq: 2, Epoch: 3}, st)
	require.ErrorIs(t, s.Append(dflt, "p", 2, seqRecs(3, recs("fenced"))), broker.ErrFenced)
	require.ErrorIs(t, s.Append("eu.orders", "p", 2, seqRecs(1, recs("fenced"))), broker.ErrFenced, "a topic the name never wrote")
	require.NoError(t, s.Append(dflt, "p", 3, seqRecs(3, recs("c"))))
	require.NoError(t, s.Close())

	for _, opts := range [][]file.Option{nil, {file.ReadOnly()}} {
		s = openFileStore(t, path, opts...)
		for _, tc := range []struct {
			topic string
			want  broker.NameState
		}{{dflt, broker.NameState{LastSeq: 3, Epoch: 3}}, {"eu.orders", broker.NameState{Epoch: 3}}} {
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
	require.ErrorIs(t, s.Fence("p", 9), file.ErrReadOnly)
	require.NoError(t, s.Close())
}

// TestFenceInSnapshot: a roll's snapshot carries every name's epoch, those
// fenced without a record too, so that a name's epoch outlives the segment
// that holds its fence entry when retention removes it.
func TestFenceInSnapshot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	opts := []file.Option{file.SegmentBytes(testSegment), file.RetainBytes(3 * testSegment), file.Fsync(file.FsyncNone)}
	s := openFileStore(t, path, opts...)
	require.NoError(t, s.Fence("fenced-only", 4))
	require.NoError(t, s.Fence("p0", 2))
	for _, c := range segmentCalls(300, 2) {
		epoch := uint64(0)
		if c.producer == "p0" {
			epoch = 2
		}
		require.NoError(t, s.Append(dflt, c.producer, epoch, seqRecs(c.first, c.records())))
	}
	require.NoError(t, s.Close())
	_, err := os.Stat(path + ".00000000000000000001")
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

// TestOpensOldVersions: a store written before epochs (2, 3), or before
// epochs per name (4, 5), opens: its header is upgraded (to 6, a rolled
// segment's to 7, so that an older inflight refuses the file once it may
// hold a name fence entry), it keeps its producers' last sequence IDs, an
// old fence entry or snapshot epoch of a (topic, producer) raises that
// name's epoch, and it fences by name from then on.
func TestOpensOldVersions(t *testing.T) {
	for _, tc := range []struct {
		version, upgraded byte
		rolled            bool
		epoch             uint64 // the name p0's epoch written before the downgrade
	}{{2, 6, false, 0}, {3, 7, true, 0}, {4, 6, false, 2}, {5, 7, true, 2}} {
		t.Run(fmt.Sprint("version ", tc.version), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store")
			var opts []file.Option
			if tc.rolled {
				opts = append(opts, file.SegmentBytes(testSegment))
			}
			s := openFileStore(t, path, append(opts, file.Fsync(file.FsyncNone))...)
			if tc.epoch > 0 {
				require.NoError(t, s.Fence("p0", tc.epoch))
			}
			for _, c := range segmentCalls(60, 2) {
				require.NoError(t, s.Append(dflt, c.producer, tc.epoch, seqRecs(c.first, c.records())))
			}
			require.NoError(t, s.Close())
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, tc.upgraded, data[7])
			data[7] = tc.version
			seg := data[8:]
			if tc.rolled {
				seg = oldSnapshot(t, seg, map[byte]byte{3: 1, 5: 2}[tc.version])
			}
			if tc.epoch > 0 {
				seg = oldFences(t, seg, "eu.orders")
			}
			require.NoError(t, os.WriteFile(path, append(data[:8], seg...), 0o600))

			s = openFileStore(t, path, opts...)
			assert.Equal(t, int(tc.version), s.Recovery().UpgradedFrom)
			want, last := fileWant(segmentCalls(60, 2))
			for name, seq := range last {
				st, err := s.State(dflt, name)
				require.NoError(t, err)
				assert.Equal(t, seq, st.LastSeq, "LastSeq(%q)", name)
				if name == "p0" {
					assert.Equal(t, tc.epoch, st.Epoch, "the epoch of a (topic, producer) is its name's")
				}
			}
			if tc.epoch > 0 {
				require.ErrorIs(t, s.Append("eu.orders", "p0", tc.epoch-1, seqRecs(1000, recs("x"))), broker.ErrFenced)
			}
			require.NoError(t, s.Fence("p0", tc.epoch+1))
			require.NoError(t, s.Close())
			data, err = os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, tc.upgraded, data[7], "the header after the upgrade")

			s = openFileStore(t, path, opts...)
			assert.Zero(t, s.Recovery().UpgradedFrom)
			st, err := s.State(dflt, "p0")
			require.NoError(t, err)
			assert.Equal(t, broker.NameState{LastSeq: last["p0"], Epoch: tc.epoch + 1}, st)
			got := fileScanAll(t, s)
			assert.Equal(t, want[len(want)-len(got):], got)
			require.NoError(t, s.Close())
		})
	}
}
