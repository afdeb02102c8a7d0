package file_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/store/file"
)

// TestTornTailWithZeroPage: 200 acknowledged records, then a write of
// several pages that a crash left with its first page zero and later bytes
// on disk (nothing after the last fsync was acknowledged): the store opens
// without an operator, every acknowledged record there, and what the
// write left is cut (no intact entry follows it) or, when an intact entry
// of it follows the zero page, moved to a side file.
func TestTornTailWithZeroPage(t *testing.T) {
	for _, intactAfter := range []bool{false, true} {
		t.Run(fmt.Sprint("intact entry after: ", intactAfter), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store")
			s := openFileStore(t, path)
			for i := range 200 {
				require.NoError(t, s.Append(dflt, "p", 0, seqRecs(uint64(i)+1, recs(fmt.Sprint("r", i)))))
			}
			require.NoError(t, s.Close())
			acked, err := os.ReadFile(path)
			require.NoError(t, err)

			// The unsynced write: one large entry (three pages), then, if
			// intactAfter, a small one; its first page never reached the disk.
			big := make([]byte, 3*4096)
			for i := range big {
				big[i] = byte('a' + i%26)
			}
			s = openFileStore(t, path, file.Fsync(file.FsyncNone))
			require.NoError(t, s.Append(dflt, "p", 0, seqRecs(201, [][]byte{big})))
			if intactAfter {
				require.NoError(t, s.Append(dflt, "p", 0, seqRecs(202, recs("small"))))
			}
			require.NoError(t, s.Close())
			crashed, err := os.ReadFile(path)
			require.NoError(t, err)
			page := (int64(len(acked))/4096 + 1) * 4096
			for i := int64(len(acked)); i < page; i++ {
				crashed[i] = 0
			}
			require.NoError(t, os.WriteFile(path, crashed, 0o600))

			s, err = file.Open(path)
			require.NoError(t, err, "a crash's torn write needs no operator")
			rec := s.Recovery()
			if intactAfter {
				assert.Equal(t, int64(len(crashed)-len(acked)), rec.RepairedBytes)
				side, err := os.ReadFile(rec.SideFile)
				require.NoError(t, err)
				assert.Equal(t, crashed[len(acked):], side, "nothing deleted")
			} else {
				assert.Equal(t, int64(len(crashed)-len(acked)), rec.TruncatedBytes)
			}
			last, err := lastSeq(s, dflt, "p")
			require.NoError(t, err)
			assert.Equal(t, uint64(200), last)
			assert.Len(t, fileScanAll(t, s), 200)
			require.NoError(t, s.Close())
		})
	}
}

// TestDirectorySyncedOnOpen: a writer's Open fsyncs the store's directory
// whether it created the file or found it (a crash between the file's
// fsync and its directory's leaves a file whose name is not durable, empty
// or not).
func TestDirectorySyncedOnOpen(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(path string) error
	}{
		{"new", func(string) error { return nil }},
		{"empty", func(path string) error { return os.WriteFile(path, nil, 0o600) }},
		{"header only", func(path string) error { return os.WriteFile(path, []byte("IFLT\x00\x00\x00\x06"), 0o600) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store")
			require.NoError(t, tc.setup(path))
			syncs := &file.DirSyncs{}
			s := openFileStore(t, path, file.WithDirSyncs(syncs))
			require.NoError(t, s.Close())
			assert.Positive(t, syncs.Count(), "the directory fsynced")
		})
	}
}

// TestRetentionGapIsPrefix: retention removes the oldest segments first,
// making each removal durable before the next, so a crash leaves a prefix
// of them removed; a hole (what an older inflight's retention could leave:
// segment 2 removed, segment 1 kept) is the same interrupted retention:
// Open, a reader and Repair all open, the segments before the hole go (a
// reader skips them), and every record of the segments after it is there.
func TestRetentionGapIsPrefix(t *testing.T) {
	setup := func(t *testing.T) (string, []string, []fileRec) {
		path := filepath.Join(t.TempDir(), "store")
		s := openFileStore(t, path, file.SegmentBytes(testSegment), file.Fsync(file.FsyncNone))
		fileAppendAll(t, s, segmentCalls(150, 3))
		var segs []string
		for _, si := range s.Segments() {
			segs = append(segs, si.Path)
		}
		require.NoError(t, s.Close())
		require.Greater(t, len(segs), 4)
		require.NoError(t, os.Remove(segs[1]))
		r := openFileStore(t, path, file.ReadOnly())
		defer r.Close()
		return path, segs, fileScanAll(t, r)
	}
	t.Run("reader", func(t *testing.T) {
		path, segs, got := setup(t)
		assert.NotEmpty(t, got)
		_, err := os.Stat(segs[0])
		require.NoError(t, err, "a reader removes nothing")
		_ = path
	})
	for _, opts := range [][]file.Option{nil, {file.Repair()}} {
		t.Run(fmt.Sprint("writer ", len(opts)), func(t *testing.T) {
			path, segs, read := setup(t)
			s := openFileStore(t, path, opts...)
			assert.Equal(t, 1, s.Recovery().Removed, "segment 1, before the hole")
			assert.Equal(t, read, fileScanAll(t, s), "what the reader saw")
			require.NoError(t, s.Close())
			_, err := os.Stat(segs[0])
			require.ErrorIs(t, err, os.ErrNotExist)
		})
	}
}
