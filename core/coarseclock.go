package core

import (
	"sync"
	"sync/atomic"
	"time"
)

const (
	// coarseTick is the resolution of the time SendAsync stamps deadlines
	// with. Reading the system clock costs ~60 ns; an atomic load ~1 ns.
	coarseTick = time.Millisecond
	// coarseIdleTicks is how many ticks with nothing pending the clock
	// waits before it sleeps until the next reader.
	coarseIdleTicks = 100
	// coarseSlack bounds, for every published value g whose successor is
	// not in the gap history, how long after g its successor was published.
	// Deadlines counted from such a g are late by at most this much.
	coarseSlack = 2 * coarseTick
	// coarseHistory is how many late ticks the clock remembers (16 bytes
	// each). Under sustained starvation every tick is late (at least
	// coarseSlack apart), so this covers at least 32 s of them.
	coarseHistory = 1 << 14
)

// coarse is the process-wide coarse clock shared by every producer that uses
// the system clock: one ticker for all of them, not one each.
var coarse = newCoarseClock(time.Now())

func newCoarseClock(epoch time.Time) *coarseClock {
	return &coarseClock{
		epoch:   epoch,
		elapsed: func() int64 { return int64(time.Since(epoch)) },
		wake:    make(chan struct{}, 1),
	}
}

// coarseClock caches the time since its epoch for SendAsync, refreshed every
// coarseTick while any registered producer has messages pending.
//
// # Why its deadlines are never early
//
// A cached value g is stale by however long its ticker was not scheduled,
// which has no bound on a starved machine. So g is never taken for the
// time a message was sent. What is true is weaker and enough: a reader that
// saw g read it before the next value was published. The ticker measures
// the time right after each publish (end); a message stamped g was sent
// before end(g), and its deadline counts from there (Upper). Regular ticks
// have end(g) <= g+coarseSlack and are not remembered; late ones are kept in
// a history. A deadline is therefore late by at most the ticker's own delay
// (or coarseSlack), never early.
//
//	published:  g0        g1        g2 ............ g3
//	end:             e0        e1                       e2   (e2-g2 > slack: kept)
//	a reader of g2 sent before e2, so its deadline is e2 + SendTimeout
//
// When the ticker is starved, a sweeper that meets a deadline stamped from
// the latest value publishes one itself, so a deadline is late by at most
// coarseSlack plus the sweeper's own scheduling delay.
//
// When no producer has had anything pending for coarseIdleTicks, the clock
// goes idle: readers read the real clock themselves (exact), and the first
// one wakes the ticker, which publishes before readers use the cache again.
//
// Its goroutine is owned by the set of registered producers: the first
// register starts it, the last unregister stops it and waits for it.
//
// Producers on the system clock share the one in coarse, and their ledgers
// check deadlines against it; tests build clocks of their own with
// newCoarseClock and give them a real time of their choosing (elapsed).
type coarseClock struct {
	_     [64]byte
	nanos atomic.Int64 // the latest published value; stored by publish only
	idle  atomic.Bool  // readers must read the real clock (no fresh value)
	_     [64]byte
	epoch time.Time
	// elapsed reads the real clock: ns since epoch. Tests of the clock's
	// bookkeeping give it a clock of their own.
	elapsed func() int64

	asleep atomic.Bool   // the ticker waits on wake; the first idle reader clears it
	wake   chan struct{} // capacity 1

	mu   sync.Mutex    // serializes starting and stopping the ticker
	stop chan struct{} // closed to stop the ticker
	done chan struct{} // closed when the ticker returned

	usersMu sync.Mutex // the ticker takes only this one
	users   map[*Producer]struct{}

	histMu sync.Mutex // publish and Upper; never held by SendAsync
	hist   gapHistory
	// sealed: the latest value will not be followed by a tick whose end
	// matters: the clock went idle after publishing it, and every reader
	// that saw it had begun before the idle flag was set.
	sealed   bool
	havePrev bool // nanos holds a value whose end the next publish measures
}

// now returns the cached time, or the real time while the clock is idle.
func (c *coarseClock) now() int64 {
	if c.idle.Load() {
		if c.asleep.CompareAndSwap(true, false) {
			select {
			case c.wake <- struct{}{}:
			default:
			}
		}
		return c.elapsed()
	}
	return c.nanos.Load()
}

// publish stores a fresh value and records how late the previous one's
// successor came. The ticker calls it every tick; a goroutine that needs a
// successor of the latest value and finds the ticker starved may call it
// too (see ledger.due): publishes are serialized by histMu, and each
// measures its end after its own store, so the bounds stay true.
func (c *coarseClock) publish() {
	c.histMu.Lock()
	defer c.histMu.Unlock()
	prev := c.nanos.Swap(c.elapsed())
	// Measured after the store: every reader of prev read it before now.
	end := c.elapsed()
	if c.havePrev && end-prev > int64(coarseSlack) {
		c.hist.add(prev, end)
	}
	c.havePrev = true
	c.sealed = false
}

// goIdle makes readers read the real clock, then publishes once more: a
// reader that saw idle unset began before this call, so it was sent before
// the last value was published, and that value needs no successor.
func (c *coarseClock) goIdle() {
	c.asleep.Store(true)
	c.idle.Store(true)
	c.publish()
	c.histMu.Lock()
	c.sealed = true
	c.havePrev = false
	c.histMu.Unlock()
}

// Upper returns a time no earlier than the moment a message stamped with g
// (a value now returned) was sent, and false when that is not known yet: g
// is the latest value and the ticker has not published since.
func (c *coarseClock) Upper(g int64) (int64, bool) {
	c.histMu.Lock()
	defer c.histMu.Unlock()
	latest := c.nanos.Load()
	switch {
	case g > latest:
		// Read from the real clock by an idle reader: exact.
		return g, true
	case g == latest:
		if c.sealed || c.idle.Load() {
			return g + int64(coarseSlack), true
		}
		return 0, false
	}
	if end, ok := c.hist.find(g); ok {
		return end, true
	}
	return max(g+int64(coarseSlack), c.hist.lostBound(g)), true
}

func (c *coarseClock) register(p *Producer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.usersMu.Lock()
	if c.users == nil {
		c.users = make(map[*Producer]struct{})
	}
	c.users[p] = struct{}{}
	first := len(c.users) == 1
	c.usersMu.Unlock()
	if first {
		c.idle.Store(true)
		c.stop = make(chan struct{})
		c.done = make(chan struct{})
		go c.run(c.stop, c.done)
	}
}

func (c *coarseClock) unregister(p *Producer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.usersMu.Lock()
	delete(c.users, p)
	last := len(c.users) == 0
	c.usersMu.Unlock()
	if last && c.stop != nil {
		close(c.stop)
		<-c.done
		c.stop = nil
	}
}

// busy reports whether any registered producer has messages pending.
func (c *coarseClock) busy() bool {
	c.usersMu.Lock()
	defer c.usersMu.Unlock()
	for p := range c.users {
		if p.budget.busy() || p.def != nil && p.def.led.ring.Len() > 0 {
			return true
		}
	}
	return false
}

// run is the ticker. It starts idle: the first reader wakes it.
func (c *coarseClock) run(stop, done chan struct{}) {
	defer close(done)
	defer c.goIdle() // readers fall back to the real clock
	c.goIdle()
	t := time.NewTicker(coarseTick)
	t.Stop()
	for {
		select {
		case <-c.wake:
		case <-stop:
			return
		}
		c.publish()
		c.idle.Store(false)
		t.Reset(coarseTick)
		for quiet := 0; quiet < coarseIdleTicks; {
			select {
			case <-t.C:
			case <-stop:
				t.Stop()
				return
			}
			c.publish()
			if c.busy() {
				quiet = 0
			} else {
				quiet++
			}
		}
		t.Stop()
		c.goIdle()
	}
}

// gapHistory remembers the late ticks: published values whose successor's
// end came more than coarseSlack after them, in publish order, in a ring.
type gapHistory struct {
	start, end []int64 // allocated on the first add
	n          uint64  // adds ever
}

func (h *gapHistory) add(start, end int64) {
	if h.start == nil {
		h.start = make([]int64, coarseHistory)
		h.end = make([]int64, coarseHistory)
	}
	i := h.n % coarseHistory
	h.start[i], h.end[i] = start, end
	h.n++
}

// find returns the end recorded for start, by binary search over the ring
// (starts grow with n).
func (h *gapHistory) find(start int64) (int64, bool) {
	kept := min(h.n, coarseHistory)
	lo, hi := h.n-kept, h.n // indices ever, [lo, hi)
	for lo < hi {
		mid := lo + (hi-lo)/2
		if h.start[mid%coarseHistory] < start {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < h.n && h.start[lo%coarseHistory] == start {
		return h.end[lo%coarseHistory], true
	}
	return 0, false
}

// lostBound returns an upper bound for the end of a value older than every
// gap still kept, once the ring has overwritten some (else 0): the oldest
// kept gap's end came after every older value's successor was published.
func (h *gapHistory) lostBound(g int64) int64 {
	if h.n <= coarseHistory {
		return 0
	}
	oldest := h.n % coarseHistory
	if g < h.start[oldest] {
		return h.end[oldest]
	}
	return 0
}
