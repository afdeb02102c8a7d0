package file_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/store/file"
)

// TestLocked: one writer per store file (flock, which the kernel
// releases when the holder dies); a reader opens it read-only beside it.
func TestLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	w := openFileStore(t, path, file.Fsync(file.FsyncNone))
	fileAppendAll(t, w, []fileCall{{"p", 1, []string{"one", "two"}}})

	second, err := file.Open(path)
	require.ErrorIs(t, err, file.ErrLocked)
	assert.Nil(t, second)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), "locked")
	_, err = file.Open(path, file.Repair())
	require.ErrorIs(t, err, file.ErrLocked, "repair needs the lock too")

	r := openFileStore(t, path, file.ReadOnly())
	checkFileStore(t, r, []fileCall{{"p", 1, []string{"one", "two"}}})
	require.ErrorIs(t, r.Append(dflt, "p", 0, seqRecs(3, recs("x"))), file.ErrReadOnly)
	fileAppendAll(t, w, []fileCall{{"p", 3, []string{"three"}}})
	last, err := lastSeq(r, dflt, "p")
	require.NoError(t, err)
	assert.Equal(t, uint64(2), last, "a reader sees what was there when it opened")
	require.NoError(t, r.Close())

	require.NoError(t, w.Close())
	again := openFileStore(t, path)
	checkFileStore(t, again, []fileCall{{"p", 1, []string{"one", "two"}}, {"p", 3, []string{"three"}}})
	require.NoError(t, again.Close())

	_, err = file.Open(filepath.Join(t.TempDir(), "missing"), file.ReadOnly())
	require.Error(t, err, "a reader does not create the file")
}

// TestReadOnlyLeavesTheTail: a reader neither cuts a torn tail (it
// may be an Append in progress) nor repairs; it reads what is complete.
func TestReadOnlyLeavesTheTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	calls := []fileCall{{"p", 1, []string{"one"}}, {"p", 2, []string{"two"}}}
	writeFileStore(t, path, calls)
	full, err := os.ReadFile(path)
	require.NoError(t, err)
	torn := append(bytes.Clone(full), full[8:20]...) // the start of an entry
	require.NoError(t, os.WriteFile(path, torn, 0o600))

	r := openFileStore(t, path, file.ReadOnly(), file.Repair())
	assert.Equal(t, fileRecovery(calls, 0), r.Recovery())
	checkFileStore(t, r, calls)
	require.NoError(t, r.Close())
	now, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, torn, now, "untouched")

	corrupt := bytes.Clone(full)
	corrupt[10] ^= 1
	require.NoError(t, os.WriteFile(path, corrupt, 0o600))
	_, err = file.Open(path, file.ReadOnly(), file.Repair())
	require.ErrorIs(t, err, file.ErrCorrupt, "a reader does not repair")
}

// TestReadOnlyNewFile: a reader of a file whose creation is still
// under way (no complete header yet) sees an empty store.
func TestReadOnlyNewFile(t *testing.T) {
	for _, content := range []string{"", "IFL"} {
		path := filepath.Join(t.TempDir(), "store")
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		r := openFileStore(t, path, file.ReadOnly())
		assert.Empty(t, fileScanAll(t, r))
		require.NoError(t, r.Close())
		now, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, content, string(now), "untouched")
	}
}
