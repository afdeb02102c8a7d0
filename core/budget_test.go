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

// TestExemptLedgerHoldsItsShare: the producer's first topic, exempt, takes
// nothing from the budget per message (its share is held for it); metered
// from the second topic on, it charges its new claims, the part of its
// share its live positions do not need goes back at once, and the rest
// once every exempt position is released, leaving the budget empty.
func TestExemptLedgerHoldsItsShare(t *testing.T) {
	b := newBudget(64, 6400, nil)
	l, err := newLedger(32, 3200, ledgerTimeout, nil, b, func() {}, make(chan struct{}, 1), false)
	require.NoError(t, err)
	l.exemptFrom()
	requirePending := func(n int, bytes int64, held int64, what string) {
		t.Helper()
		c, by := b.pending()
		require.Equal(t, n, c, what)
		require.Equal(t, bytes, by, what)
		require.Equal(t, held, b.held.Load(), what)
	}
	requirePending(32, 3200, 32, "the share held")
	for range 10 {
		_, _, err := l.tryClaim([]int64{100})
		require.NoError(t, err)
	}
	requirePending(32, 3200, 32, "exempt claims take nothing")

	l.meter()
	require.False(t, l.exempt())
	require.Equal(t, uint64(10), l.meterFrom.Load())
	requirePending(10, 1000, 10, "of the share, what the live exempt positions hold, until they are released")
	for range 5 {
		_, _, err := l.tryClaim([]int64{100})
		require.NoError(t, err)
	}
	requirePending(15, 1500, 10, "metered claims are charged")

	l.release(4)
	requirePending(15, 1500, 10, "some exempt positions still live")
	l.release(12) // the last exempt ones, and two metered
	requirePending(3, 300, 0, "the share went back")
	l.release(15)
	requirePending(0, 0, 0, "empty")
	l.meter() // idempotent
	requirePending(0, 0, 0, "empty")
}

// TestMeterEmptyExemptLedgerGivesShareAtOnce: a first topic that holds
// nothing when a second topic appears gives its share back at once (no
// release will come to do it).
func TestMeterEmptyExemptLedgerGivesShareAtOnce(t *testing.T) {
	b := newBudget(64, 6400, nil)
	l, err := newLedger(32, 3200, ledgerTimeout, nil, b, func() {}, make(chan struct{}, 1), false)
	require.NoError(t, err)
	l.exemptFrom()
	pos, _, err := l.tryClaim([]int64{100})
	require.NoError(t, err)
	l.release(pos + 1)
	l.meter()
	assert.Zero(t, b.used.Load())
	assert.Zero(t, b.held.Load())
}

// TestMeterRacingClaimsLeaveNoCharge: claimers of an exempt ledger racing
// with the end of its exemption are charged exactly for what they claimed
// after it: once every position is released, the budget is empty.
func TestMeterRacingClaimsLeaveNoCharge(t *testing.T) {
	for range 50 {
		b := newBudget(1<<16, 1<<30, nil)
		l, err := newLedger(1<<14, 1<<28, ledgerTimeout, nil, b, func() {}, make(chan struct{}, 1), false)
		require.NoError(t, err)
		l.exemptFrom()
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for i := range 200 {
					sizes := []int64{10}
					if i%3 == 0 {
						sizes = []int64{10, 20, 30}
					}
					_, _, err := l.tryClaim(sizes)
					assert.NoError(t, err)
				}
			})
		}
		wg.Go(l.meter)
		wg.Wait()
		l.release(l.ring.Tail())
		c, by := b.pending()
		require.Zero(t, c)
		require.Zero(t, by)
		require.Zero(t, b.held.Load())
	}
}
