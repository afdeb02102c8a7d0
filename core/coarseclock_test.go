package core

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The coarse clock's bookkeeping, on a clock of the test's: a private
// coarseClock whose elapsed returns what the test set.

const ms = int64(time.Millisecond)

// testCoarse returns a coarse clock whose real time is *at.
func testCoarse(at *atomic.Int64) *coarseClock {
	c := newCoarseClock(time.Time{})
	c.elapsed = at.Load
	return c
}

// TestCoarseClockUpper: Upper bounds when a reader of a published value
// sent its message: the value itself once the clock went idle or when the
// reader read the real clock; the end of the next publish when that came
// late (kept in the history); the value plus coarseSlack otherwise; and
// "not known yet" for the latest value while the ticker may still run.
func TestCoarseClockUpper(t *testing.T) {
	var at atomic.Int64
	c := testCoarse(&at)

	c.publish() // at 0
	at.Store(1 * ms)
	c.publish() // a regular tick: not kept
	upper := func(g int64) int64 {
		t.Helper()
		u, ok := c.Upper(g)
		require.True(t, ok, "Upper(%d)", g)
		return u
	}
	assert.Equal(t, 0+coarseSlackNs(), upper(0), "regular tick: the value plus the slack")
	_, ok := c.Upper(1 * ms)
	assert.False(t, ok, "the latest value: its successor is not published yet")

	at.Store(10 * ms)
	c.publish() // 9ms after the one before: a late tick, kept
	assert.Equal(t, 10*ms, upper(1*ms), "late tick: when its successor was published")
	assert.Equal(t, coarseSlackNs(), upper(0), "older values are unaffected")

	at.Store(12 * ms)
	c.goIdle() // publishes once more, then readers read the real clock
	assert.True(t, c.idle.Load())
	assert.Equal(t, 12*ms, upper(10*ms), "the tick to 12ms came within the slack")
	assert.Equal(t, 12*ms+coarseSlackNs(), upper(12*ms), "the value the clock went idle on is sealed")

	at.Store(15 * ms)
	g := c.now() // idle: the real clock, exact
	assert.Equal(t, 15*ms, g)
	assert.Equal(t, 15*ms, upper(g), "a value read from the real clock is exact")

	at.Store(20 * ms)
	c.publish() // the ticker woke: the first value after idle has no predecessor to measure
	assert.Equal(t, uint64(1), c.hist.n, "only the late tick at 1ms is in the history")
}

func coarseSlackNs() int64 { return int64(coarseSlack) }

// TestCoarseClockIdleReaderWakesTicker: while idle, a reader reads the real
// clock and wakes the sleeping ticker once; while awake, readers read the
// cached value.
func TestCoarseClockIdleReaderWakesTicker(t *testing.T) {
	var at atomic.Int64
	c := testCoarse(&at)
	at.Store(5 * ms)
	c.goIdle()
	require.True(t, c.asleep.Load())

	at.Store(7 * ms)
	assert.Equal(t, 7*ms, c.now())
	assert.Equal(t, 7*ms, c.now())
	assert.False(t, c.asleep.Load(), "the first idle reader wakes the ticker")
	assert.Len(t, c.wake, 1, "one wake-up, however many readers")

	c.publish()
	c.idle.Store(false) // as run does after its first publish
	at.Store(8 * ms)
	assert.Equal(t, 7*ms, c.now(), "awake: the cached value")
}

// TestGapHistoryWraps: the history keeps the last coarseHistory late ticks;
// a value older than all of them is bounded by the oldest kept one's end.
func TestGapHistoryWraps(t *testing.T) {
	var h gapHistory
	_, ok := h.find(0)
	assert.False(t, ok, "empty")
	const extra = 10
	for i := range int64(coarseHistory + extra) {
		h.add(i*10*ms, i*10*ms+5*ms)
	}
	for _, i := range []int64{extra, extra + 1, coarseHistory, coarseHistory + extra - 1} {
		end, ok := h.find(i * 10 * ms)
		assert.True(t, ok, "gap %d is kept", i)
		assert.Equal(t, i*10*ms+5*ms, end, "gap %d", i)
	}
	_, ok = h.find(extra*10*ms + 1)
	assert.False(t, ok, "a start never added")
	_, ok = h.find((extra - 1) * 10 * ms)
	assert.False(t, ok, "overwritten")
	assert.Equal(t, extra*10*ms+5*ms, h.lostBound((extra-1)*10*ms), "older than every kept gap: the oldest kept end")
	assert.Zero(t, h.lostBound(extra*10*ms), "not older than every kept gap")

	var fresh gapHistory
	fresh.add(0, 5*ms)
	assert.Zero(t, fresh.lostBound(-1), "nothing overwritten yet")
}

// TestCoarseClockUpperAfterHistoryWrapped: a value older than every gap
// kept is bounded by the oldest kept gap's end, not by its own slack.
func TestCoarseClockUpperAfterHistoryWrapped(t *testing.T) {
	var at atomic.Int64
	c := testCoarse(&at)
	c.publish() // at 0
	for i := range int64(coarseHistory + 1) {
		at.Store((i + 1) * 10 * ms)
		c.publish() // every tick late
	}
	// The gap starting at 0 was overwritten; the oldest kept starts at
	// 10ms and ended at 20ms.
	u, ok := c.Upper(0)
	require.True(t, ok)
	assert.Equal(t, 20*ms, u)
}

// TestCoarseClockRunSleepsWhenNothingPending: the ticker goes idle after
// coarseIdleTicks ticks with nothing pending, stays awake while a producer
// has messages pending, and is woken by the first reader.
func TestCoarseClockRunSleepsWhenNothingPending(t *testing.T) {
	var publishes atomic.Int64
	c := newCoarseClock(time.Now())
	real := c.elapsed
	c.elapsed = func() int64 { publishes.Add(1); return real() }
	quiet := &Producer{budget: newBudget(4, 1<<20, nil)}
	busy := &Producer{budget: newBudget(4, 1<<20, nil)}
	bl, _, err := newTestLedger(4, 1<<20, ledgerTimeout, nil, false)
	require.NoError(t, err)
	bl.budget = busy.budget
	_, _, _, err = bl.claim(context.Background(), []int64{1}, 0, false, nil, nil)
	require.NoError(t, err)

	c.register(quiet)
	defer c.unregister(quiet)
	waitFor(t, "the ticker to sleep", func() bool { return c.asleep.Load() })
	c.now() // wakes it
	waitFor(t, "the ticker to wake", func() bool { return !c.idle.Load() })
	waitFor(t, "the ticker to sleep again", func() bool { return c.idle.Load() && c.asleep.Load() })

	c.register(busy)
	c.now()
	waitFor(t, "the ticker to wake", func() bool { return !c.idle.Load() })
	from := publishes.Load()
	waitFor(t, "2*coarseIdleTicks ticks", func() bool { return publishes.Load()-from >= 2*2*coarseIdleTicks })
	assert.False(t, c.idle.Load(), "awake while a producer has messages pending")
	c.unregister(busy)
	waitFor(t, "the ticker to sleep", func() bool { return c.idle.Load() && c.asleep.Load() })
}

func testLedger(t *testing.T) *ledger {
	l, _, err := newTestLedger(4, 1<<20, ledgerTimeout, nil, false)
	require.NoError(t, err)
	return l
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// TestDeadlineFromCoarseValueNeverEarly: a deadline stamped from a cached
// value expires no earlier than SendTimeout after the message could have
// been sent: after the end of the tick that replaced the value (kept when
// late), or, when the ticker has not replaced it yet, after the moment the
// ledger publishes a successor itself.
func TestDeadlineFromCoarseValueNeverEarly(t *testing.T) {
	const timeout = 100 * ms
	var at atomic.Int64
	c := testCoarse(&at)
	l, _, err := newTestLedger(4, 1<<20, time.Duration(timeout), c, false)
	require.NoError(t, err)

	c.publish() // at 0: a message stamped now has deadline d
	d := c.now() + timeout

	// The ticker is starved: 0 is still the latest value at the deadline.
	// The message may have been sent just now, so it expires a timeout
	// from now, once the ledger published a successor at now.
	at.Store(timeout)
	expired, next := l.due(d, timeout)
	assert.False(t, expired)
	assert.Equal(t, 2*timeout, next)
	assert.Equal(t, 2*timeout, l.expiry(d, timeout))
	expired, _ = l.due(d, 2*timeout)
	assert.True(t, expired)

	// A regular tick: sent by the value's end, at most coarseSlack later.
	at.Store(300 * ms)
	c.publish()
	at.Store(301 * ms)
	c.publish()
	d = 300*ms + timeout
	expired, next = l.due(d, d+1*ms)
	assert.False(t, expired)
	assert.Equal(t, d+coarseSlackNs(), next)
	expired, _ = l.due(d, d+coarseSlackNs())
	assert.True(t, expired)

	// A late tick: the value 301ms was replaced only at 350ms.
	at.Store(350 * ms)
	c.publish()
	d = 301*ms + timeout
	expired, next = l.due(d, d+10*ms)
	assert.False(t, expired)
	assert.Equal(t, 350*ms+timeout, next)
	assert.Equal(t, 350*ms+timeout, l.expiry(d, d))
	expired, _ = l.due(d, 350*ms+timeout)
	assert.True(t, expired)
}
