package ringbuf

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPagerOnRecycledPage: a Pager that looked a page up before the
// consumer released and recycled it, and a claim took it again for other
// positions, finds those positions' stamps there: the position it asks
// about reads as Unpublished, and no transition through the stale slot
// changes the position that holds it now.
func TestPagerOnRecycledPage(t *testing.T) {
	r, _ := New[int](32, 1<<20)
	require.Greater(t, r.Cap(), pageLen, "a ring of several pages")
	pg := r.Pager()
	for range pageLen {
		pos, err := r.TryClaim(1)
		require.NoError(t, err)
		r.Publish(pos)
	}
	stale := pg.Peek(5)
	require.Equal(t, Pending, pg.State(5))
	for p := range uint64(pageLen) {
		_, ok := r.Resolve(p, Acked)
		require.True(t, ok)
	}
	r.Release(pageLen)
	require.Nil(t, r.Peek(5), "a wholly released page of a sparse ring leaves the table")

	for range pageLen { // the next page's claims take the kept one
		pos, err := r.TryClaim(1)
		require.NoError(t, err)
		r.Publish(pos)
	}
	require.Same(t, stale, r.Peek(pageLen+5), "the recycled page holds positions 16 to 31")
	assert.Equal(t, Unpublished, pg.State(5), "the stale lookup does not hold 5")
	assert.Equal(t, Unpublished, r.StateAt(stale, 5))
	assert.False(t, r.TransitionAt(stale, 5, Pending, Writing))
	assert.False(t, r.TransitionAt(stale, 5, Acked, Done))
	_, ok := r.Resolve(5, Expired)
	assert.False(t, ok, "released")
	assert.Equal(t, Pending, r.State(pageLen+5), "the position the slot holds now is untouched")
	assert.Equal(t, Pending, pg.State(pageLen+5), "the Pager finds the page of 21")
	assert.Same(t, r.Peek(pageLen+5), pg.Peek(pageLen+5))
}

// TestFreezeSplitsClaims: claims racing with Freeze land either below the
// tail it returns or after Thaw; a claimer that lands at or above it sees
// what the freezer stored before Thaw (the ledger's meterFrom), and none
// lands while the ring is frozen.
func TestFreezeSplitsClaims(t *testing.T) {
	for round := range 50 {
		r, _ := New[int](1<<12, 1<<30)
		var marker atomic.Uint64
		marker.Store(math.MaxUint64)
		type claim struct{ pos, n, seen uint64 }
		results := make([][]claim, 3)
		var wg sync.WaitGroup
		for g := range results {
			wg.Go(func() {
				for i := range 200 {
					var pos uint64
					n := 1
					var err error
					if (g+i)%3 == 0 {
						pos, n, err = r.TryClaimN([]int64{1, 2, 3})
					} else {
						pos, err = r.TryClaim(1)
					}
					if !assert.NoError(t, err) {
						return
					}
					results[g] = append(results[g], claim{pos, uint64(n), marker.Load()})
					r.PublishN(pos, n)
				}
			})
		}
		for range round % 7 {
			runtime.Gosched()
		}
		split := r.Freeze()
		for range 3 {
			runtime.Gosched()
			require.Equal(t, split, r.Tail(), "no claim while frozen")
		}
		marker.Store(split)
		r.Thaw()
		wg.Wait()
		for _, rs := range results {
			for _, c := range rs {
				if c.pos < split {
					assert.LessOrEqual(t, c.pos+c.n, split, "a run does not straddle the split")
				} else {
					assert.Equal(t, split, c.seen, "claimed at %d, at or after the split %d, without seeing the marker", c.pos, split)
				}
			}
		}
	}
}

// TestFreezeBesideClose: a frozen ring closes (claims then fail with
// ErrClosed), CloseIfEmpty refuses while frozen and changes nothing, and
// Freeze of a closed ring returns its tail.
func TestFreezeBesideClose(t *testing.T) {
	r, _ := New[int](8, 1<<20)
	assert.Equal(t, uint64(0), r.Freeze())
	assert.False(t, r.CloseIfEmpty(), "frozen")
	assert.False(t, r.Closed())
	r.Thaw()
	assert.True(t, r.CloseIfEmpty(), "empty and thawed")

	r, _ = New[int](8, 1<<20)
	pos, err := r.TryClaim(1)
	require.NoError(t, err)
	r.Publish(pos)
	assert.Equal(t, uint64(1), r.Freeze())
	r.Close()
	assert.Equal(t, uint64(1), r.Tail())
	assert.Equal(t, 1, r.Len())
	r.Thaw()
	assert.True(t, r.Closed())
	_, err = r.TryClaim(1)
	assert.ErrorIs(t, err, ErrClosed)
	_, _, err = r.TryClaimN([]int64{1, 1})
	assert.ErrorIs(t, err, ErrClosed)
	assert.Equal(t, uint64(1), r.Freeze(), "a closed ring freezes")
	r.Thaw()
	assert.True(t, r.Closed(), "and stays closed")
	assert.Equal(t, uint64(1), r.Tail())
}
