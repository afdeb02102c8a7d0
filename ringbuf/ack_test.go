package ringbuf

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAckThroughCursor: AckThrough makes Written positions below it Acked,
// with no store to their slots; a position resolved before keeps its
// outcome, one being written again becomes Acked once its writer marks it
// Written, and a resolver leaves the positions the cursor took.
func TestAckThroughCursor(t *testing.T) {
	r := writtenRing(t, 8, 6, 5)
	_, ok := r.Resolve(1, Expired)
	require.True(t, ok)
	require.True(t, r.Transition(2, Written, Writing)) // a resend of 2

	r.AckThrough(4)
	r.AckThrough(2) // never goes back
	assert.Equal(t, uint64(4), r.Acked())
	for p, want := range []State{Acked, Expired, Writing, Acked, Written, Pending} {
		assert.Equal(t, want, r.State(uint64(p)), "position %d", p)
	}
	prev, ok := r.Resolve(3, Canceled)
	assert.False(t, ok, "the cursor took it")
	assert.Equal(t, Acked, prev)
	require.True(t, r.Transition(2, Writing, Written), "the resend ends")
	assert.Equal(t, Acked, r.State(2))
	prev, ok = r.Resolve(4, Canceled)
	assert.True(t, ok, "above the cursor")
	assert.Equal(t, Written, prev)
}

// TestAckThroughBesideResolvers moves the acked cursor in steps while
// resolvers fail Written positions at random and a reader walks them in
// order, as inflight's dispatcher does: a position the reader saw resolved
// keeps that outcome, each position resolves once (a resolver's success,
// or Acked by the cursor), and the cursor never makes Acked a position a
// resolver resolved. Without AckThrough's wait for pins, a resolver that
// read ackedTo before the cursor moved resolves a position the reader has
// already seen Acked, and this fails (a hook yields between the
// resolver's check and its CAS, so that the window is wide enough to meet).
func TestAckThroughBesideResolvers(t *testing.T) {
	testHookPinned = runtime.Gosched
	defer func() { testHookPinned = nil }()
	for round := range 20 {
		const n = 4096
		r := writtenRing(t, n, n, n)

		var won [n]atomic.Int32
		var seen [n]State // the reader's
		var stop atomic.Bool
		var wg, reader sync.WaitGroup
		for g := range 3 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(round), uint64(g)))
				for !stop.Load() {
					p := uint64(rng.IntN(n))
					if prev, ok := r.Resolve(p, Expired); ok {
						if prev != Written {
							t.Errorf("position %d resolved from %v", p, prev)
						}
						won[p].Add(1)
					}
				}
			})
		}
		reader.Go(func() { // the reader: in order, stopping at the first position not resolved
			next := uint64(0)
			for next < n {
				st := r.State(next)
				if !st.Final() {
					runtime.Gosched()
					continue
				}
				seen[next] = st
				next++
			}
		})
		rng := rand.New(rand.NewPCG(uint64(round), 99))
		for upto := uint64(0); upto < n; {
			upto = min(n, upto+1+uint64(rng.IntN(64)))
			r.AckThrough(upto)
			if rng.IntN(4) == 0 {
				runtime.Gosched()
			}
		}
		reader.Wait() // it ends once every position is resolved
		stop.Store(true)
		wg.Wait()
		for p := range uint64(n) {
			st := r.State(p)
			switch {
			case seen[p] != st:
				t.Fatalf("round %d: position %d read %v, then it is %v", round, p, seen[p], st)
			case st == Acked && won[p].Load() != 0:
				t.Fatalf("round %d: position %d Acked and resolved by a resolver", round, p)
			case st == Expired && won[p].Load() != 1:
				t.Fatalf("round %d: position %d Expired by %d resolvers", round, p, won[p].Load())
			case st != Acked && st != Expired:
				t.Fatalf("round %d: position %d is %v", round, p, st)
			}
		}
	}
}

// writtenRing returns a ring of capacity positions with positions 0 to
// published-1 published, of which 0 to written-1 are written (moved to
// Writing and past the written cursor).
func writtenRing(t *testing.T, capacity, published, written int) *Ring[int] {
	t.Helper()
	r, err := newRing[int](capacity, 1<<30)
	require.NoError(t, err)
	for range published {
		pos, err := r.TryClaim(1)
		require.NoError(t, err)
		r.Publish(pos)
	}
	for p := range uint64(written) {
		require.True(t, r.Transition(p, Pending, Writing))
	}
	r.MarkWritten(uint64(written))
	return r
}
