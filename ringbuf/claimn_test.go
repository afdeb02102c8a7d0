package ringbuf

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTryClaimNLimits(t *testing.T) {
	for _, tc := range []struct {
		name      string
		limit     int
		maxBytes  int64
		before    []int64 // claimed one by one first
		sizes     []int64
		wantFirst uint64
		wantN     int
		wantErr   error
	}{
		{"all fit", 8, 100, nil, []int64{1, 2, 3}, 0, 3, nil},
		{"count limit cuts the run", 4, 100, []int64{1}, []int64{1, 1, 1, 1, 1}, 1, 3, nil},
		{"count limit is exact, not the power of two", 5, 100, nil, []int64{1, 1, 1, 1, 1, 1, 1}, 0, 5, nil},
		{"byte limit cuts the run", 8, 10, []int64{4}, []int64{3, 3, 1}, 1, 2, nil},
		{"a prefix only: a small later item does not jump a large one", 8, 10, []int64{4}, []int64{3, 9, 1}, 1, 1, nil},
		{"oversized first item into an empty ring", 8, 10, nil, []int64{50, 1}, 0, 1, nil},
		{"zero sizes are limited by count only", 4, 1, []int64{1}, []int64{0, 0, 0, 0}, 1, 3, nil},
		{"full by count", 2, 100, []int64{1, 1}, []int64{1}, 0, 0, ErrFull},
		{"full by bytes", 8, 10, []int64{10}, []int64{1, 1}, 0, 0, ErrFull},
		{"empty", 8, 10, nil, []int64{}, 0, 0, ErrInvalidSize},
		{"negative", 8, 10, nil, []int64{1, -1}, 0, 0, ErrInvalidSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := newRing[int](tc.limit, tc.maxBytes)
			require.NoError(t, err)
			var bytes int64
			for _, s := range tc.before {
				pos, err := r.TryClaim(s)
				require.NoError(t, err)
				r.Publish(pos)
				bytes += s
			}
			first, n, err := r.TryClaimN(tc.sizes)
			require.ErrorIs(t, err, tc.wantErr)
			assert.Equal(t, tc.wantN, n)
			if err != nil {
				assert.Equal(t, bytes, r.Bytes(), "a refused claim holds no bytes")
				assert.Equal(t, uint64(len(tc.before)), r.Tail())
				return
			}
			assert.Equal(t, tc.wantFirst, first)
			assert.Equal(t, first+uint64(n), r.Tail())
			for i, s := range tc.sizes[:n] {
				bytes += s
				assert.Equal(t, s, r.Slot(first+uint64(i)).Size(), "item %d", i)
			}
			assert.Equal(t, bytes, r.Bytes())
			r.PublishN(first, n)
			r.Release(r.Tail())
			assert.Equal(t, int64(0), r.Bytes(), "release returns every claimed byte")
		})
	}
}

func TestTryClaimNClosed(t *testing.T) {
	r, _ := newRing[int](8, 100)
	r.Close()
	_, _, err := r.TryClaimN([]int64{1, 2})
	assert.ErrorIs(t, err, ErrClosed)
	assert.Equal(t, int64(0), r.Bytes())
}

func TestClaimNWaitsForRelease(t *testing.T) {
	r, _ := newRing[int](4, 1<<20)
	first, n, err := r.TryClaimN([]int64{1, 1, 1, 1})
	require.NoError(t, err)
	r.PublishN(first, n)
	got := make(chan int, 1)
	go func() {
		_, n, err := r.ClaimN([]int64{1, 1, 1}, nil)
		assert.NoError(t, err)
		got <- n
	}()
	r.Release(2) // room for two of the three
	select {
	case n := <-got:
		assert.Equal(t, 2, n)
	case <-time.After(waitTimeout):
		t.Fatal("ClaimN not woken by Release")
	}

	done := make(chan struct{})
	close(done)
	_, _, err = r.ClaimN([]int64{1}, done)
	assert.ErrorIs(t, err, ErrCanceled)
	r.Close()
	_, _, err = r.ClaimN([]int64{1}, nil)
	assert.ErrorIs(t, err, ErrClosed)
}

// TestConcurrentClaimNLinearizable: producers claim runs of varying length
// from a small ring (runs are cut and producers wait often) while one
// consumer drains; every item comes out exactly once, each producer's in
// its order.
func TestConcurrentClaimNLinearizable(t *testing.T) {
	const producers, perProducer = 4, 20000
	r, _ := newRing[seqItem](64, 200)

	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			sizes := make([]int64, 0, 16)
			for s := 0; s < perProducer; {
				sizes = sizes[:0]
				for i := range min(1+(s+p)%16, perProducer-s) {
					sizes = append(sizes, int64(1+(s+i)%7))
				}
				first, n, err := r.ClaimN(sizes, nil)
				if !assert.NoError(t, err) {
					return
				}
				for i := range n {
					r.Slot(first + uint64(i)).Value = seqItem{p, s + i}
				}
				r.PublishN(first, n)
				s += n
			}
		})
	}
	drainInOrder(t, r, producers, perProducer, &wg)
}

func TestClaimNAllocatesNothing(t *testing.T) {
	r, _ := newRing[int](1024, 1<<20)
	sizes := make([]int64, 64)
	buf := make([]int, 0, 64)
	allocs := testing.AllocsPerRun(1000, func() {
		first, n, err := r.TryClaimN(sizes)
		if err != nil {
			panic(err)
		}
		r.PublishN(first, n)
		buf, _ = r.Drain(buf[:0], 64, nil)
	})
	assert.Zero(t, allocs)
}
