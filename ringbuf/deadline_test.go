package ringbuf

import (
	"runtime"
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
	readDeadlinesBeside(t, r, 1, func() { // claimer, resolver and releaser: one goroutine, as Release needs
		for i := 0; i < rounds; i++ {
			pos, err := r.TryClaim(1)
			if !assert.NoError(t, err) {
				return
			}
			r.Slot(pos).SetDeadline(deadlineOf(pos))
			r.Publish(pos)
			if i%8 == 0 {
				runtime.Gosched() // the reader meets unresolved positions on one CPU too
			}
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
}

// TestDeadlineAtBesideRecycledPages is TestDeadlineAtBesideReleases on a
// paged ring that drains after every run of claims, so that its released
// pages go off the page table and come back, through its spares, for later
// positions (see recycle): the reader's slot, looked up before the pin,
// may be on such a page.
func TestDeadlineAtBesideRecycledPages(t *testing.T) {
	const rounds = 5000
	r, err := New[int](64, 1<<20)
	require.NoError(t, err)
	readDeadlinesBeside(t, r, 8, func() {
		for i := 0; i < rounds; i++ {
			first := r.Tail()
			n := uint64(1 + i%40)
			for range n {
				pos, err := r.TryClaim(1)
				if !assert.NoError(t, err) {
					return
				}
				r.Slot(pos).SetDeadline(deadlineOf(pos))
				r.Publish(pos)
			}
			runtime.Gosched()
			for pos := first; pos < first+n; pos++ {
				r.Resolve(pos, Expired)
				if st := r.State(pos); !st.Final() {
					t.Errorf("position %d is %v before its release", pos, st)
					return
				}
			}
			r.Release(first + n)
		}
	})
}

// deadlineOf is the deadline the tests give position pos.
func deadlineOf(pos uint64) int64 { return int64(pos)*7 + 3 }

// readDeadlinesBeside runs consume (claims, resolutions and releases of r,
// each deadline deadlineOf(pos)) on a goroutine of its own and, until it
// returns, reads deadlines with DeadlineAt, of positions from head to
// head+spread-1 in turn, each slot looked up with a Pager first and, now
// and then, a yield between the look-up and the pin (which lets consume go
// on, on one CPU too). It fails the test when a read that met a published,
// unresolved position returns anything but deadlineOf(pos), or when no
// read met one (the test would have checked nothing).
func readDeadlinesBeside(t *testing.T, r *Ring[int], spread uint64, consume func()) {
	t.Helper()
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		defer done.Store(true)
		consume()
	})
	defer wg.Wait() // also after a Fatalf below
	read := 0
	pager := r.Pager()
	for i := uint64(0); !done.Load(); i++ {
		pos := r.Head() + i%spread
		s := pager.Peek(pos)
		if i%16 == 0 {
			runtime.Gosched()
		}
		d, st := r.DeadlineAt(s, pos)
		if st == Unpublished || st.Final() {
			continue
		}
		read++
		if d != deadlineOf(pos) {
			t.Fatalf("position %d (%v): deadline %d, want %d", pos, st, d, deadlineOf(pos))
		}
	}
	t.Logf("%d deadlines read of unresolved positions", read)
	assert.Positive(t, read, "no read met an unresolved position: the test checked nothing")
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
