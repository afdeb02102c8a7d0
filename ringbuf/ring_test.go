package ringbuf

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds every wait in these tests; reaching it is a failure,
// never a success condition.
const waitTimeout = 5 * time.Second

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		limit int
		bytes int64
	}{{0, 1}, {-1, 1}, {1, 0}, {1, -5}, {1 << 41, 1}} {
		_, err := New[int](tc.limit, tc.bytes)
		assert.ErrorIs(t, err, ErrInvalidSize, "limit %d bytes %d", tc.limit, tc.bytes)
	}
	r, err := New[int](5, 100)
	require.NoError(t, err)
	assert.Equal(t, 8, r.Cap())
}

// pop takes the value at head: Drain of one.
func pop(r *Ring[int], done <-chan struct{}) (int, error) {
	buf, err := r.Drain(nil, 1, done)
	if err != nil {
		return 0, err
	}
	return buf[0], nil
}

func TestFIFOAcrossManyWraps(t *testing.T) {
	r, err := newRing[int](4, 1<<20)
	require.NoError(t, err)
	for i := range 1000 {
		pos, err := r.TryClaim(1)
		require.NoError(t, err)
		require.Equal(t, uint64(i), pos)
		r.Slot(pos).Value = i
		r.Publish(pos)
		v, err := pop(r, nil)
		require.NoError(t, err)
		require.Equal(t, i, v)
	}
	assert.Equal(t, 0, r.Len())
	assert.Equal(t, int64(0), r.Bytes())
}

func TestTryClaimLimits(t *testing.T) {
	t.Run("count limit is exact, not the power of two", func(t *testing.T) {
		r, _ := newRing[int](3, 1<<20)
		for range 3 {
			pos, err := r.TryClaim(1)
			require.NoError(t, err)
			r.Publish(pos)
		}
		_, err := r.TryClaim(1)
		assert.ErrorIs(t, err, ErrFull)
		r.Release(1)
		_, err = r.TryClaim(1)
		assert.NoError(t, err)
	})
	t.Run("byte limit", func(t *testing.T) {
		r, _ := newRing[int](100, 10)
		_, err := r.TryClaim(6)
		require.NoError(t, err)
		_, err = r.TryClaim(5)
		assert.ErrorIs(t, err, ErrFull)
		_, err = r.TryClaim(4)
		assert.NoError(t, err)
		assert.Equal(t, int64(10), r.Bytes())
	})
	t.Run("one oversized claim is admitted into an empty ring", func(t *testing.T) {
		r, _ := newRing[int](100, 10)
		pos, err := r.TryClaim(50)
		require.NoError(t, err)
		_, err = r.TryClaim(0)
		assert.NoError(t, err, "zero bytes fit even over the limit")
		_, err = r.TryClaim(1)
		assert.ErrorIs(t, err, ErrFull)
		r.Publish(pos)
		r.Publish(pos + 1)
		r.Release(pos + 2)
		assert.Equal(t, int64(0), r.Bytes())
	})
	t.Run("negative size", func(t *testing.T) {
		r, _ := newRing[int](1, 1)
		_, err := r.TryClaim(-1)
		assert.ErrorIs(t, err, ErrInvalidSize)
	})
}

func TestClaimWaitsForRelease(t *testing.T) {
	r, _ := newRing[int](2, 1<<20)
	for range 2 {
		pos, _ := r.TryClaim(1)
		r.Publish(pos)
	}
	got := make(chan uint64)
	go func() {
		pos, err := r.Claim(1, nil)
		assert.NoError(t, err)
		got <- pos
	}()
	waitFor(t, func() bool { return r.space.waiters.Load() == 1 }, "claimer to park")
	select {
	case <-got:
		t.Fatal("Claim returned while the ring was full")
	default:
	}
	r.Release(1)
	select {
	case pos := <-got:
		assert.Equal(t, uint64(2), pos)
	case <-time.After(waitTimeout):
		t.Fatal("Claim not woken by Release")
	}
}

func TestClaimWaitsForBytes(t *testing.T) {
	r, _ := newRing[int](10, 10)
	pos, _ := r.TryClaim(8)
	r.Publish(pos)
	got := make(chan error)
	go func() {
		_, err := r.Claim(5, nil)
		got <- err
	}()
	waitFor(t, func() bool { return r.space.waiters.Load() == 1 }, "claimer to park")
	r.Release(pos + 1)
	select {
	case err := <-got:
		assert.NoError(t, err)
	case <-time.After(waitTimeout):
		t.Fatal("Claim not woken when bytes were freed")
	}
}

func TestClaimCanceledAndClosed(t *testing.T) {
	r, _ := newRing[int](1, 1<<20)
	pos, _ := r.TryClaim(1)
	r.Publish(pos)

	done := make(chan struct{})
	close(done)
	_, err := r.Claim(1, done)
	assert.ErrorIs(t, err, ErrCanceled)

	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := r.Claim(1, nil)
			errs <- err
		}()
	}
	waitFor(t, func() bool { return r.space.waiters.Load() == 3 }, "claimers to park")
	r.Close()
	r.Close() // idempotent
	for range 3 {
		select {
		case err := <-errs:
			assert.ErrorIs(t, err, ErrClosed)
		case <-time.After(waitTimeout):
			t.Fatal("Close did not wake a claimer")
		}
	}
	_, err = r.TryClaim(1)
	assert.ErrorIs(t, err, ErrClosed)

	// What was claimed before Close can still be consumed.
	v, err := pop(r, nil)
	assert.NoError(t, err)
	assert.Equal(t, 0, v)
	_, err = pop(r, nil)
	assert.ErrorIs(t, err, ErrClosed)
}

func TestWaitPublishedWakesConsumer(t *testing.T) {
	r, _ := newRing[int](4, 1<<20)
	got := make(chan int)
	go func() {
		v, err := pop(r, nil)
		assert.NoError(t, err)
		got <- v
	}()
	waitFor(t, func() bool { return r.consumer.parked.Load() }, "consumer to park")
	pos, _ := r.TryClaim(0)
	r.Slot(pos).Value = 42
	r.Publish(pos)
	select {
	case v := <-got:
		assert.Equal(t, 42, v)
	case <-time.After(waitTimeout):
		t.Fatal("Publish did not wake the consumer")
	}

	done := make(chan struct{})
	close(done)
	assert.ErrorIs(t, r.WaitPublishedUntil(r.Tail(), done, nil), ErrCanceled)
}

func TestStampsRejectStalePositions(t *testing.T) {
	r, _ := newRing[int](2, 1<<20)
	assert.Equal(t, Unpublished, r.State(0), "fresh slot is not position 0 yet")
	pos, _ := r.TryClaim(1)
	assert.Equal(t, Unpublished, r.State(pos), "claimed is not published")
	r.Publish(pos)
	require.Equal(t, Pending, r.State(pos))
	require.True(t, r.Transition(pos, Pending, Acked))
	r.Release(pos + 1)

	// Recycle the slot: positions 1, 2 (slot 0 again).
	for range 2 {
		p, err := r.TryClaim(1)
		require.NoError(t, err)
		r.Publish(p)
	}
	assert.Equal(t, Unpublished, r.State(pos), "slot now holds position 2")
	assert.False(t, r.Transition(pos, Pending, Expired), "a CAS aimed at the old position must fail")
	_, ok := r.Resolve(pos, Expired)
	assert.False(t, ok)
	assert.Equal(t, Pending, r.State(2))
}

func TestResolveExactlyOnce(t *testing.T) {
	const n = 2000
	r, _ := newRing[int](n, 1<<30)
	for range n {
		pos, _ := r.TryClaim(1)
		r.Publish(pos)
	}
	var wins [n]atomic.Int32
	var wg sync.WaitGroup
	outcomes := []State{Acked, Expired, Canceled, Closed}
	for _, to := range outcomes {
		wg.Go(func() {
			for p := range uint64(n) {
				if _, ok := r.Resolve(p, to); ok {
					wins[p].Add(1)
				}
			}
		})
	}
	// A writer cycling slots through Writing must not let anyone resolve
	// twice or lose the slot.
	wg.Go(func() {
		for p := range uint64(n) {
			if r.Transition(p, Pending, Writing) {
				r.Transition(p, Writing, Written)
			}
		}
	})
	wg.Wait()
	for p := range n {
		require.Equal(t, int32(1), wins[p].Load(), "position %d", p)
		require.True(t, r.State(uint64(p)).Final())
	}
}

func TestResolveWaitsForPublish(t *testing.T) {
	r, _ := newRing[int](2, 1<<20)
	pos, _ := r.TryClaim(1)
	res := make(chan bool)
	go func() {
		_, ok := r.Resolve(pos, Canceled)
		res <- ok
	}()
	r.Publish(pos)
	select {
	case ok := <-res:
		assert.True(t, ok)
	case <-time.After(waitTimeout):
		t.Fatal("Resolve of a claimed position did not finish after Publish")
	}
	_, ok := r.Resolve(99, Canceled)
	assert.False(t, ok, "never claimed")
}

func TestWaitHead(t *testing.T) {
	r, _ := newRing[int](4, 1<<20)
	for range 3 {
		pos, _ := r.TryClaim(1)
		r.Publish(pos)
	}
	res := make(chan error)
	go func() { res <- r.WaitHead(3, nil) }()
	waitFor(t, func() bool { return r.space.waiters.Load() == 1 }, "waiter to park")
	r.Release(2)
	select {
	case <-res:
		t.Fatal("WaitHead returned before head reached target")
	default:
	}
	r.Release(3)
	select {
	case err := <-res:
		assert.NoError(t, err)
	case <-time.After(waitTimeout):
		t.Fatal("WaitHead not woken")
	}
	done := make(chan struct{})
	close(done)
	assert.ErrorIs(t, r.WaitHead(10, done), ErrCanceled)
}

// TestConcurrentProducersLinearizable pushes from many goroutines through a
// small ring (so producers wait often) into one batch consumer, and checks
// that every item comes out exactly once and that each producer's items come
// out in the order it pushed them.
func TestConcurrentProducersLinearizable(t *testing.T) {
	r, _ := newRing[seqItem](64, 1<<20)
	claimAndDrain(t, r, 8, 20000)
}

// claimAndDrain runs producers claimers of perProducer items each, one by
// one, against the consumer of drainInOrder.
func claimAndDrain(t *testing.T, r *Ring[seqItem], producers, perProducer int) {
	t.Helper()
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for s := range perProducer {
				pos, err := r.Claim(1, nil)
				if !assert.NoError(t, err) {
					return
				}
				r.Slot(pos).Value = seqItem{p, s}
				r.Publish(pos)
			}
		})
	}
	drainInOrder(t, r, producers, perProducer, &wg)
}

// seqItem is an item of the linearizability tests: its producer and its
// place in that producer's sequence.
type seqItem struct{ producer, seq int }

// drainInOrder is the one consumer of the linearizability tests: it drains r
// while the producers run (wg waits for them) and checks that every item
// comes out exactly once and each producer's items in their order, and that
// the ring ends empty.
func drainInOrder(t *testing.T, r *Ring[seqItem], producers, perProducer int, wg *sync.WaitGroup) {
	t.Helper()
	consumed := make(chan struct{})
	next := make([]int, producers)
	total := 0
	go func() {
		defer close(consumed)
		buf := make([]seqItem, 0, 32)
		for total < producers*perProducer {
			var err error
			buf, err = r.Drain(buf[:0], 32, nil)
			if !assert.NoError(t, err) {
				return
			}
			for _, it := range buf {
				if it.seq != next[it.producer] {
					t.Errorf("producer %d: got seq %d, want %d", it.producer, it.seq, next[it.producer])
					return
				}
				next[it.producer]++
				total++
			}
		}
	}()
	wg.Wait()
	select {
	case <-consumed:
	case <-time.After(30 * time.Second):
		t.Fatal("consumer stuck")
	}
	assert.Equal(t, producers*perProducer, total)
	for p := range producers {
		assert.Equal(t, perProducer, next[p])
	}
	assert.Equal(t, 0, r.Len())
	assert.Equal(t, int64(0), r.Bytes())
}

func TestSteadyStateAllocatesNothing(t *testing.T) {
	r, _ := New[[]byte](1024, 1<<20)
	payload := make([]byte, 100)
	buf := make([][]byte, 0, 64)
	allocs := testing.AllocsPerRun(1000, func() {
		for range 64 {
			pos, err := r.TryClaim(int64(len(payload)))
			if err != nil {
				panic(err)
			}
			s := r.Slot(pos)
			s.Value = payload
			s.SetDeadline(1)
			r.Publish(pos)
		}
		buf, _ = r.Drain(buf[:0], 64, nil)
	})
	assert.Zero(t, allocs)
}

func TestStateNames(t *testing.T) {
	assert.Equal(t, "acked", Acked.String())
	assert.Equal(t, "invalid", State(15).String())
	assert.Equal(t, "aborted", Aborted.String())
	assert.True(t, Expired.Failed())
	assert.True(t, Aborted.Failed())
	assert.False(t, Acked.Failed())
	assert.False(t, Done.Failed())
	assert.True(t, Done.Final())
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// TestFailedClaimWakesNobody: a claim refused because every slot is taken
// must not wake waiters (it reserves no bytes, so it has none to give back).
// It used to reserve first and give back after, waking every waiter, itself
// included: a blocked claimer spun, allocating a wake-up channel per turn.
func TestFailedClaimWakesNobody(t *testing.T) {
	r, _ := newRing[int](1, 1<<20)
	pos, _ := r.TryClaim(10)
	r.Publish(pos)
	room := r.ArmRoom()
	defer r.DisarmRoom()
	_, err := r.TryClaim(10)
	require.ErrorIs(t, err, ErrFull)
	select {
	case <-room:
		t.Fatal("a refused claim woke the waiters")
	default:
	}
	assert.Equal(t, int64(10), r.Bytes())
}

// TestMarkWrittenCursor: a fresh write's Writing below the written cursor
// is Written to everyone (Resolve, Transition, State); a resend's Writing
// is not, and Resolve waits for it to end.
func TestMarkWrittenCursor(t *testing.T) {
	r, _ := newRing[int](8, 1<<20)
	for range 4 {
		pos, _ := r.TryClaim(1)
		r.Publish(pos)
	}
	for p := range uint64(3) {
		require.True(t, r.Transition(p, Pending, Writing))
	}
	assert.Equal(t, Writing, r.State(0), "before the cursor moves")
	r.MarkWritten(3)
	r.MarkWritten(1) // never goes back
	for p := range uint64(3) {
		assert.Equal(t, Written, r.State(p), "position %d", p)
	}
	assert.Equal(t, Pending, r.State(3), "above the cursor, never written")
	assert.False(t, r.Transition(1, Writing, Acked), "Written below the cursor is not the writer's Writing")

	assert.True(t, r.Transition(0, Written, Acked))
	prev, ok := r.Resolve(1, Expired)
	assert.True(t, ok)
	assert.Equal(t, Written, prev)

	// A resend takes position 2 back: Writing, whatever the cursor says,
	// until the writer moves it to Written itself.
	require.True(t, r.Transition(2, Written, Writing))
	assert.Equal(t, Writing, r.State(2))
	assert.False(t, r.Transition(2, Written, Acked), "being written again")
	res := make(chan State)
	go func() {
		prev, _ := r.Resolve(2, Canceled)
		res <- prev
	}()
	require.True(t, r.Transition(2, Writing, Written))
	select {
	case prev := <-res:
		assert.Equal(t, Written, prev, "Resolve waited for the resend to end")
	case <-time.After(waitTimeout):
		t.Fatal("Resolve of a resent position did not finish after the writer moved it to Written")
	}
	assert.Equal(t, Canceled, r.State(2))
}

// TestResolveExactlyOnceWithCursor is TestResolveExactlyOnce with a writer
// that marks its runs written by the cursor and resends every position once.
func TestResolveExactlyOnceWithCursor(t *testing.T) {
	const n, run = 2000, 16
	r, _ := newRing[int](n, 1<<30)
	for range n {
		pos, _ := r.TryClaim(1)
		r.Publish(pos)
	}
	var wins [n]atomic.Int32
	var wg sync.WaitGroup
	for _, to := range []State{Acked, Expired, Canceled} {
		wg.Go(func() {
			for p := range uint64(n) {
				if to == Acked {
					if r.Transition(p, Written, Acked) {
						wins[p].Add(1)
					}
					continue
				}
				if _, ok := r.Resolve(p, to); ok {
					wins[p].Add(1)
				}
			}
		})
	}
	wg.Go(func() {
		for first := uint64(0); first < n; first += run {
			for p := first; p < first+run; p++ {
				r.Transition(p, Pending, Writing)
			}
			r.MarkWritten(first + run)
		}
		for p := range uint64(n) { // the resend
			if r.Transition(p, Written, Writing) {
				require.Equal(t, Writing, r.State(p))
				require.True(t, r.Transition(p, Writing, Written))
			}
		}
	})
	wg.Wait()
	for p := range uint64(n) {
		if r.State(p) == Written { // nobody acknowledged or failed it: do it now
			_, ok := r.Resolve(p, Closed)
			require.True(t, ok)
			wins[p].Add(1)
		}
		require.Equal(t, int32(1), wins[p].Load(), "position %d", p)
		require.True(t, r.State(p).Final(), "position %d: %v", p, r.State(p))
	}
}

// TestPagerFollowsPages: a Pager finds the same slots as Ring.Peek, in
// order and out of order, across page boundaries and wraps, in a ring
// smaller than a page too, and nil where no claim reached a page.
func TestPagerFollowsPages(t *testing.T) {
	for _, limit := range []int{5, 16, 100} {
		r, _ := New[int](limit, 1<<30)
		pg := r.Pager()
		assert.Nil(t, pg.Peek(0), "limit %d: no page yet", limit)
		assert.Equal(t, Unpublished, pg.State(0))
		for pos := range uint64(3 * r.Cap()) { // wraps three times
			p, err := r.TryClaim(1)
			require.NoError(t, err)
			require.Equal(t, pos, p)
			r.Publish(p)
			require.Same(t, r.Peek(p), pg.Peek(p), "limit %d pos %d", limit, p)
			require.Equal(t, Pending, pg.State(p))
			if p > 0 {
				require.Same(t, r.Peek(p-1), pg.Peek(p-1), "back one")
			}
			r.Release(p + 1)
		}
	}
}

// TestConcurrentProducersAcrossRecycledPages is
// TestConcurrentProducersLinearizable over rings whose pages the consumer
// takes off and hands back (see recycle), with limits at, near and well
// below the capacity (where claims reach back into the page of head).
func TestConcurrentProducersAcrossRecycledPages(t *testing.T) {
	for _, limit := range []int{256, 250, 100, 1000} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			r, _ := New[seqItem](limit, 1<<20)
			claimAndDrain(t, r, 4, 20000)
		})
	}
}

// TestSparseRingKeepsFewPages: a ring that holds a few positions at a time
// while it cycles through many times its capacity holds about as many
// pages as those positions need, not one per page of its capacity; a ring
// kept full keeps its pages.
func TestSparseRingKeepsFewPages(t *testing.T) {
	attached := func(r *Ring[int]) int {
		n := 0
		for i := range r.pages {
			if bk := r.pages[i].Load(); bk != nil {
				for j := range bk {
					if bk[j].Load() != nil {
						n++
					}
				}
			}
		}
		return n
	}
	r, _ := New[int](32768, 1<<30)
	for range 10 * r.Cap() / 8 {
		first, n, err := r.TryClaimN([]int64{1, 1, 1, 1, 1, 1, 1, 1})
		require.NoError(t, err)
		require.Equal(t, 8, n)
		r.PublishN(first, n)
		r.Release(first + uint64(n))
	}
	assert.LessOrEqual(t, attached(r), 2, "pages on the table of a ring holding 8 positions at a time")
	assert.LessOrEqual(t, attached(r)+len(r.spares.pages), 3, "pages held in all (on the table and spare)")

	full, _ := New[int](256, 1<<30)
	for range 256 {
		pos, _ := full.TryClaim(1)
		full.Publish(pos)
	}
	for range 10 * 256 { // one out, one in: always full
		pos, err := full.TryClaim(1)
		require.ErrorIs(t, err, ErrFull)
		full.Release(full.Head() + 1)
		pos, err = full.TryClaim(1)
		require.NoError(t, err)
		full.Publish(pos)
	}
	assert.Equal(t, full.Cap()/pageLen, attached(full), "a full ring keeps every page")
}

// TestRefilledRingAllocatesNothing: a ring that fills and drains again and
// again (a busy producer's, whose occupancy swings through half its limit,
// where release starts taking pages off the table) allocates its pages in
// the first fill only: later fills take back the pages the drains kept.
func TestRefilledRingAllocatesNothing(t *testing.T) {
	r, _ := New[int](4096, 1<<30)
	sizes := make([]int64, 64)
	for i := range sizes {
		sizes[i] = 1
	}
	cycle := func() {
		for r.Tail()-r.Head() < 4096 {
			first, n, err := r.TryClaimN(sizes)
			if err != nil {
				t.Fatalf("claim: %v", err)
			}
			r.PublishN(first, n)
		}
		for h := r.Head(); h < r.Tail(); h += 64 {
			r.Release(h + 64) // drained in steps, as a consumer releases
		}
	}
	cycle()
	assert.Zero(t, testing.AllocsPerRun(20, cycle), "allocations per fill and drain after the first")
}

// TestSpareDepth: a claim that needs a page takes the spare kept
// spareDepth pages before the last (the oldest of fewer), never the page
// just kept while others are.
func TestSpareDepth(t *testing.T) {
	r, err := New[int](1024, 1<<20)
	require.NoError(t, err)
	pages := make([]*[pageLen]Slot[int], spareDepth+3)
	for i := range pages {
		pages[i] = new([pageLen]Slot[int])
	}
	r.keep(pages[0])
	r.keep(pages[1])
	require.True(t, r.spare() == pages[0], "the oldest of fewer than spareDepth")
	require.True(t, r.spare() == pages[1])
	for _, pg := range pages {
		r.keep(pg)
	}
	// spareDepth+3 kept: the third oldest is spareDepth before the last.
	require.True(t, r.spare() == pages[2], "spareDepth pages before the last")
	require.True(t, r.spare() == pages[1])
	require.True(t, r.spare() == pages[0])
	require.True(t, r.spare() == pages[3], "then the oldest of fewer")
	require.Len(t, r.spares.pages, spareDepth-1)
	for range spareDepth - 1 {
		require.True(t, r.spare() != nil)
	}
	require.Empty(t, r.spares.pages)
	require.NotNil(t, r.spare(), "a new page when none is spare")
}
