package ringbuf

import (
	"sync"
	"sync/atomic"
)

// event wakes every goroutine waiting for a condition that another goroutine
// makes true (room in the ring, head past a position). Waiters arm, re-check
// their condition, then block on the returned channel; the signaller changes
// the condition, then broadcasts. Because both sides use sequentially
// consistent atomics (waiters count, then the condition), at least one of
// them sees the other: no wake-up is lost. The signaller pays one atomic load
// when nobody waits; a channel is allocated only when someone does.
type event struct {
	waiters atomic.Int64
	mu      sync.Mutex
	ch      chan struct{}
}

func (e *event) arm() <-chan struct{} {
	e.waiters.Add(1)
	e.mu.Lock()
	if e.ch == nil {
		e.ch = make(chan struct{})
	}
	c := e.ch
	e.mu.Unlock()
	return c
}

func (e *event) disarm() { e.waiters.Add(-1) }

func (e *event) broadcast() {
	if e.waiters.Load() == 0 {
		return
	}
	e.mu.Lock()
	if e.ch != nil {
		close(e.ch)
		e.ch = nil
	}
	e.mu.Unlock()
}

// parker lets the single consumer sleep until a producer publishes. The
// producer's cost when the consumer is awake is one atomic load.
type parker struct {
	parked atomic.Bool
	ch     chan struct{} // capacity 1: a wake-up is never lost, at most one is spurious
}

func newParker() parker { return parker{ch: make(chan struct{}, 1)} }

func (p *parker) wake() {
	if p.parked.Load() && p.parked.CompareAndSwap(true, false) {
		p.kick()
	}
}

func (p *parker) kick() {
	select {
	case p.ch <- struct{}{}:
	default:
	}
}

// Signal wakes every goroutine waiting for a condition that another
// goroutine makes true, for conditions kept beside rings (a memory budget
// several rings share). Waiters Arm, re-check their condition, then block
// on the returned channel, and Disarm once after every Arm; the signaller
// changes the condition, then calls Broadcast, which costs one atomic load
// when nobody waits. The zero value is ready to use.
type Signal struct{ e event }

// Arm starts a wait: the channel is closed by the next Broadcast.
func (s *Signal) Arm() <-chan struct{} { return s.e.arm() }

// Disarm ends a wait begun with Arm.
func (s *Signal) Disarm() { s.e.disarm() }

// Broadcast wakes every armed waiter.
func (s *Signal) Broadcast() { s.e.broadcast() }
