package ringbuf

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDeadlineAtBesideReleases reads deadlines with DeadlineAt while the
// consumer resolves and releases the same positions and claimers take their
// slots again at once: a ring of 4 slots, each deadline a function of its
// position. A read that reports a published, unresolved state must return
// that position's deadline, never the next claim's; under the race detector
// a read the pin did not keep from the next claim's write is reported.
// (Run by TestFlatRing too.)
func TestDeadlineAtBesideReleases(t *testing.T) {
	const rounds = 20000
	r, err := newRing[int](4, 1<<20)
	require.NoError(t, err)
	deadline := func(pos uint64) int64 { return int64(pos)*7 + 3 }
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() { // claimer, resolver and releaser: one goroutine, as Release needs
		defer done.Store(true)
		for i := 0; i < rounds; i++ {
			pos, err := r.TryClaim(1)
			if !assert.NoError(t, err) {
				return
			}
			r.Slot(pos).SetDeadline(deadline(pos))
			r.Publish(pos)
			if _, ok := r.Resolve(pos, Expired); !ok && !r.State(pos).Final() {
				t.Errorf("position %d: not resolved", pos)
				return
			}
			if st := r.State(pos); !st.Final() { // the consumer reads it resolved, as inflight's walk does
				t.Errorf("position %d is %v before its release", pos, st)
				return
			}
			r.Release(pos + 1)
		}
	})
	var read int
	for !done.Load() {
		pos := r.Head()
		d, st := r.DeadlineAt(r.Peek(pos), pos)
		if st == Unpublished || st.Final() {
			continue
		}
		read++
		if d != deadline(pos) {
			t.Fatalf("position %d (%v): deadline %d, want %d", pos, st, d, deadline(pos))
		}
	}
	wg.Wait()
	t.Logf("%d deadlines read of unresolved positions", read)
}

func TestDeadlineAtUnpublished(t *testing.T) {
	r, err := newRing[int](4, 1<<20)
	require.NoError(t, err)
	d, st := r.DeadlineAt(nil, 0)
	assert.Equal(t, Unpublished, st)
	assert.Zero(t, d)
	pos, err := r.TryClaim(1)
	require.NoError(t, err)
	r.Slot(pos).SetDeadline(42)
	_, st = r.DeadlineAt(r.Peek(pos), pos)
	assert.Equal(t, Unpublished, st, "claimed, not yet published")
	r.Publish(pos)
	d, st = r.DeadlineAt(r.Peek(pos), pos)
	assert.Equal(t, Pending, st)
	assert.Equal(t, int64(42), d)
	_, st = r.DeadlineAt(r.Peek(pos+4), pos+4)
	assert.Equal(t, Unpublished, st, "a later position of the same slot")
	r.Resolve(pos, Acked)
	_, st = r.DeadlineAt(r.Peek(pos), pos)
	assert.Equal(t, Acked, st)
}
