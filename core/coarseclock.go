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
)

// coarse is the process-wide coarse clock shared by every producer that uses
// the system clock: one ticker for all of them, not one each.
var coarse = &coarseClock{epoch: time.Now(), wake: make(chan struct{}, 1)}

// coarseClock caches the time since its epoch, refreshed every coarseTick
// while any registered producer has messages pending. When none has for a
// while it goes idle; the next reader then reads the real clock itself and
// wakes it. Deadlines stamped with it are at most one tick (plus the
// ticker's scheduling delay) early, never late.
//
// Its goroutine is owned by the set of registered producers: the first
// register starts it, the last unregister stops it and waits for it.
type coarseClock struct {
	_     [64]byte
	nanos atomic.Int64
	idle  atomic.Bool
	_     [64]byte
	epoch time.Time

	mu   sync.Mutex    // serializes starting and stopping the ticker
	wake chan struct{} // capacity 1

	stop chan struct{} // closed to stop the ticker
	done chan struct{} // closed when the ticker returned

	usersMu sync.Mutex // the ticker takes only this one
	users   map[*Producer]struct{}
}

func (c *coarseClock) now() int64 {
	if c.idle.Load() {
		n := int64(time.Since(c.epoch))
		c.nanos.Store(n)
		if c.idle.CompareAndSwap(true, false) {
			select {
			case c.wake <- struct{}{}:
			default:
			}
		}
		return n
	}
	return c.nanos.Load()
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
		go c.run(c.wake, c.stop, c.done)
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
		c.idle.Store(true) // readers fall back to the real clock
	}
}

// busy reports whether any registered producer has messages pending.
func (c *coarseClock) busy() bool {
	c.usersMu.Lock()
	defer c.usersMu.Unlock()
	for p := range c.users {
		if p.ring.Len() != 0 {
			return true
		}
	}
	return false
}

func (c *coarseClock) run(wake, stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(coarseTick)
	defer t.Stop()
	quiet := 0
	for {
		select {
		case <-t.C:
		case <-stop:
			return
		}
		c.nanos.Store(int64(time.Since(c.epoch)))
		if c.busy() {
			quiet = 0
			continue
		}
		if quiet++; quiet < coarseIdleTicks {
			continue
		}
		quiet = 0
		c.idle.Store(true)
		t.Stop()
		select {
		case <-wake:
		case <-stop:
			return
		}
		t.Reset(coarseTick)
	}
}
