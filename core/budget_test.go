package core

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBudgetPackedAndWide: the budget admits and refuses the same claims
// whether its count and bytes share one word (the default limits) or two
// (limits too large for one), and gives back to zero.
func TestBudgetPackedAndWide(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxCount int
		maxBytes int64
		wide     bool
	}{
		{"packed", 10, 1000, false},
		{"packed-largest", packedMaxCount, packedMaxBytes, false},
		{"wide-count", packedMaxCount + 1, 1000, true},
		{"wide-bytes", 10, packedMaxBytes + 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBudget(tc.maxCount, tc.maxBytes, nil)
			require.Equal(t, tc.wide, b.wide)
			require.True(t, b.take(1, 600))
			c, by := b.pending()
			assert.Equal(t, 1, c)
			assert.Equal(t, int64(600), by)
			if tc.maxBytes == 1000 {
				assert.False(t, b.take(1, 500), "over the bytes")
			}
			require.True(t, b.take(1, 400), "up to the bytes")
			if tc.maxCount == 10 {
				assert.False(t, b.take(9, 0), "over the count")
				require.True(t, b.take(8, 0), "up to the count")
				b.give(8, 0)
			}
			b.give(2, 1000)
			c, by = b.pending()
			assert.Equal(t, 0, c)
			assert.Equal(t, int64(0), by)
			// One claim larger than a limit is admitted when nothing else is.
			require.True(t, b.take(1, tc.maxBytes+5))
			assert.False(t, b.take(1, 1), "nothing more beside it")
			b.give(1, tc.maxBytes+5)
			assert.Zero(t, b.used.Load())
		})
	}
}

// TestBudgetConcurrentTakesStayWithinLimits: many claimers racing for a
// small budget never hold more than its limits together, and every
// reservation given back leaves it empty.
func TestBudgetConcurrentTakesStayWithinLimits(t *testing.T) {
	for _, wide := range []bool{false, true} {
		maxCount := 64
		if wide {
			maxCount = packedMaxCount + 64
		}
		b := newBudget(maxCount, 64*100, nil)
		var mu sync.Mutex
		var held, heldBytes, peak, peakBytes int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 2000 {
					if !b.take(1, 100) {
						continue
					}
					mu.Lock()
					held, heldBytes = held+1, heldBytes+100
					peak, peakBytes = max(peak, held), max(peakBytes, heldBytes)
					mu.Unlock()
					mu.Lock()
					held, heldBytes = held-1, heldBytes-100
					mu.Unlock()
					b.give(1, 100)
				}
			})
		}
		wg.Wait()
		assert.LessOrEqual(t, peakBytes, int64(64*100), "wide=%v", wide)
		assert.LessOrEqual(t, peak, int64(maxCount), "wide=%v", wide)
		c, by := b.pending()
		assert.Zero(t, c, "wide=%v", wide)
		assert.Zero(t, by, "wide=%v", wide)
	}
}
