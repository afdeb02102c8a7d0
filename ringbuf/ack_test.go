package ringbuf

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// TestResendBesideAckThrough: the writer takes a Written position back for
// a resend (Written to Writing) while AckThrough moves the cursor past it.
// A hook runs AckThrough while the writer is between its check of the
// cursor's target and its CAS: AckThrough waits for the writer's pin, so no
// reader sees the position Acked before the writer has it (without the pin
// the reader does, and the position then goes back to Writing). Once the
// writer marks it Written again it is Acked.
func TestResendBesideAckThrough(t *testing.T) {
	r := writtenRing(t, 8, 2, 2)
	done := make(chan struct{})
	var during State
	testHookPinned = func() {
		testHookPinned = nil
		go func() {
			r.AckThrough(1)
			close(done)
		}()
		waitFor(t, func() bool { return r.ackedTo.Load() == 1 }, "AckThrough to take position 0")
		select { // it must wait for the pin: give it the time to show that it does not
		case <-done:
		case <-time.After(20 * time.Millisecond):
		}
		during = r.State(0)
	}
	defer func() { testHookPinned = nil }()
	require.True(t, r.Transition(0, Written, Writing), "the writer checked the cursor before AckThrough moved it")
	assert.Equal(t, Written, during, "seen while the writer held the position, between its check and its CAS")
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("AckThrough did not end once the writer unpinned")
	}
	assert.Equal(t, Writing, r.State(0), "being written again")
	require.True(t, r.Transition(0, Writing, Written))
	assert.Equal(t, Acked, r.State(0))
}

// TestResendRefusedOnceAckThroughStarted: a writer that read a position
// Written before AckThrough announced its target, and pins it after, leaves
// it (the receipt took it), even when AckThrough moves the cursor while the
// writer holds its pin (AckThrough waits only for the older pin it saw). A
// hook holds the writer between its check and its CAS until AckThrough is
// done; without the check the writer takes the position back and this
// fails.
func TestResendRefusedOnceAckThroughStarted(t *testing.T) {
	r := writtenRing(t, 8, 4, 4)
	s := r.Peek(0)
	w := s.state.Load() // the writer reads position 0 Written (TransitionAt's first step)
	require.Equal(t, Written, r.view(0, State(w&stateMask)))
	r.pin(1) // an older resolver's pin, below AckThrough's target: it waits for it
	done := make(chan struct{})
	go func() {
		r.AckThrough(2)
		close(done)
	}()
	waitFor(t, func() bool { return r.ackedTo.Load() == 2 }, "AckThrough to announce 2")
	testHookPinned = func() {
		select {
		case <-done:
		case <-time.After(waitTimeout):
			t.Error("AckThrough waited for the writer's pin")
		}
	}
	defer func() { testHookPinned = nil }()
	took := make(chan bool)
	go func() { // the writer goes on: pin, check, CAS
		ok, _ := r.casWritten(s, 0, w, rewriting)
		took <- ok
	}()
	r.unpin()
	select {
	case ok := <-took:
		assert.False(t, ok, "the writer took back a position AckThrough had taken")
	case <-time.After(waitTimeout):
		t.Fatal("the writer did not end")
	}
	<-done
	assert.Equal(t, Acked, r.State(0))
	assert.Equal(t, Written, r.State(2))
}

// TestStateReadAcrossAResolution: a reader that read a position's word
// Written, then (after a resolver failed it and AckThrough moved the cursor
// past it) reads the cursor, reports the failure, not Acked: it reads the
// word again after the cursors (StateAt's second step, from the stale
// word). Read once, the stale word and the new cursor said Acked.
func TestStateReadAcrossAResolution(t *testing.T) {
	r := writtenRing(t, 8, 2, 2)
	s := r.Peek(0)
	stale := s.state.Load() // the reader's first read
	_, ok := r.Resolve(0, Expired)
	require.True(t, ok)
	r.AckThrough(2)
	assert.Equal(t, Expired, r.stateFrom(s, 0, stale))
	assert.Equal(t, Acked, r.State(1))
}
