package broker_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
)

// TestFileStoreLocked: one writer per store file (flock, which the kernel
// releases when the holder dies); a reader opens it read-only beside it.
func TestFileStoreLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	w := openFileStore(t, path, broker.Fsync(broker.FsyncNone))
	fileAppendAll(t, w, []fileCall{{"p", 1, []string{"one", "two"}}})

	second, err := broker.OpenFileStore(path)
	require.ErrorIs(t, err, broker.ErrLocked)
	assert.Nil(t, second)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), "locked")
	_, err = broker.OpenFileStore(path, broker.Repair())
	require.ErrorIs(t, err, broker.ErrLocked, "repair needs the lock too")

	r := openFileStore(t, path, broker.ReadOnly())
	checkFileStore(t, r, []fileCall{{"p", 1, []string{"one", "two"}}})
	require.ErrorIs(t, r.Append(dflt, "p", seqRecs(3, recs("x"))), broker.ErrReadOnly)
	fileAppendAll(t, w, []fileCall{{"p", 3, []string{"three"}}})
	last, err := r.LastSeq(dflt, "p")
	require.NoError(t, err)
	assert.Equal(t, uint64(2), last, "a reader sees what was there when it opened")
	require.NoError(t, r.Close())

	require.NoError(t, w.Close())
	again := openFileStore(t, path)
	checkFileStore(t, again, []fileCall{{"p", 1, []string{"one", "two"}}, {"p", 3, []string{"three"}}})
	require.NoError(t, again.Close())

	_, err = broker.OpenFileStore(filepath.Join(t.TempDir(), "missing"), broker.ReadOnly())
	require.Error(t, err, "a reader does not create the file")
}
