package file_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"path/filepath"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/store/file"
)

// TestEpochsNeverReused: a forgotten name's epoch is never given again,
// across restarts: the roll that forgets reserves an epoch above every one
// ever given (the floor, in the snapshot); the forgotten incarnation is
// below it and fenced, a new one gets an epoch above it; a pinned name (a
// live session) is never forgotten.
func TestEpochsNeverReused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	opts := []file.Option{file.SegmentBytes(testSegment), file.Fsync(file.FsyncNone),
		file.ForgetProducersAfter(time.Hour), file.WithNow(clock)}
	big := strings.Repeat("z", testSegment) // an Append that rolls
	state := func(s *file.Store, name string) broker.NameState {
		st, err := s.State(dflt, name)
		require.NoError(t, err)
		return st
	}

	s := openFileStore(t, path, opts...)
	require.NoError(t, s.Fence("a", 1))
	require.NoError(t, s.Append(dflt, "a", 1, seqRecs(1, recs("a1", "a2"))))
	require.NoError(t, s.Fence("live", 5))
	s.Pin("live")
	require.NoError(t, s.Fence("busy", 1))
	advance(2 * time.Hour)
	require.NoError(t, s.Append(dflt, "busy", 1, seqRecs(1, recs(big)))) // rolls: a forgotten
	floor := state(s, "a").Epoch
	assert.Greater(t, floor, uint64(5), "above every epoch ever given")
	assert.Equal(t, broker.NameState{Epoch: floor}, state(s, "a"))
	assert.Equal(t, uint64(5), state(s, "live").Epoch, "pinned: kept")
	require.NoError(t, s.Close())

	s = openFileStore(t, path, opts...)
	defer s.Close()
	assert.Equal(t, broker.NameState{Epoch: floor}, state(s, "a"), "the floor outlives a restart")
	require.ErrorIs(t, s.Fence("a", 1), broker.ErrFenced, "the forgotten incarnation")
	require.ErrorIs(t, s.Append(dflt, "a", 1, seqRecs(3, recs("a3"))), broker.ErrFenced)
	require.NoError(t, s.Fence("a", floor+1), "a new incarnation")
	require.NoError(t, s.Append(dflt, "a", floor+1, seqRecs(1, recs("new"))))
	assert.Equal(t, broker.NameState{LastSeq: 1, Epoch: floor + 1}, state(s, "a"))
	assert.GreaterOrEqual(t, state(s, "never-seen").Epoch, floor, "a new name starts above the floor too")
}
