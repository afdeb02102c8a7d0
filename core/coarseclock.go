package core

import (
	"sync/atomic"
	"time"

	"github.com/inflightmq/inflight/ringbuf"
)

const (
	// coarseTick is the resolution of the time SendAsync stamps deadlines
	// with. Reading the system clock costs ~60 ns; an atomic load ~1 ns.
	coarseTick = time.Millisecond
	// coarseIdleTicks is how many ticks with an empty ring the clock waits
	// before it sleeps until the next SendAsync.
	coarseIdleTicks = 100
)

// coarseClock caches the time since the producer's epoch, refreshed every
// coarseTick while messages are pending. When the ring has been empty for a
// while it goes idle; the next reader then reads the real clock itself and
// wakes it. Deadlines are therefore at most one tick (plus scheduling delay
// of the ticker) early, never late.
type coarseClock struct {
	_     [64]byte
	nanos atomic.Int64
	idle  atomic.Bool
	_     [64]byte
	epoch time.Time
	ring  *ringbuf.Ring[entry]
	wake  chan struct{}
}

func newCoarseClock(epoch time.Time, ring *ringbuf.Ring[entry]) *coarseClock {
	c := &coarseClock{epoch: epoch, ring: ring, wake: make(chan struct{}, 1)}
	c.idle.Store(true)
	return c
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

// run is the ticker goroutine; it returns when stop is closed.
func (c *coarseClock) run(stop <-chan struct{}) {
	t := time.NewTicker(coarseTick)
	defer t.Stop()
	empty := 0
	for {
		select {
		case <-t.C:
		case <-stop:
			return
		}
		c.nanos.Store(int64(time.Since(c.epoch)))
		if c.ring.Len() != 0 {
			empty = 0
			continue
		}
		if empty++; empty < coarseIdleTicks {
			continue
		}
		empty = 0
		c.idle.Store(true)
		t.Stop()
		select {
		case <-c.wake:
		case <-stop:
			return
		}
		t.Reset(coarseTick)
	}
}
