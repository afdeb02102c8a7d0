package main

import (
	"context"
	"sync/atomic"
)

// slots hands out the indexes of reusable messages (and their callbacks)
// whose previous callback has run. produce and the demo send from a fixed
// set of core.Message values; a message may be reused only once the
// producer is done with it, that is once its callback ran. Counting
// acceptances is not enough with several topics: MaxPending bounds the
// messages not yet resolved, and a message of one topic may be resolved,
// and its budget taken by a new message, before the callback goroutine got
// to it (callbacks run per topic, in order within each).
//
// get takes slots round robin: in steady state the next one is free and
// get is one atomic load and store. A busy one (a topic whose messages
// wait for their receipts) is stepped over: the scan goes on to the next
// free slot, so a stalled topic does not stall the others.
//
// get is for one goroutine (the sender); put is safe from any (callbacks).
type slots struct {
	busy    []atomic.Bool
	next    int // the sender's: where get looks first
	waiting atomic.Bool
	wake    chan struct{} // a slot was freed while get waited
}

// newSlots returns n free slots, 0 to n-1.
func newSlots(n int) *slots {
	return &slots{busy: make([]atomic.Bool, n), wake: make(chan struct{}, 1)}
}

// get returns a free slot, marked busy, waiting for one if every slot is
// busy; false if ctx ended first.
func (s *slots) get(ctx context.Context) (int, bool) {
	for announced := false; ; {
		for j := range s.busy {
			i := (s.next + j) % len(s.busy)
			if !s.busy[i].Load() {
				s.busy[i].Store(true)
				s.next = (i + 1) % len(s.busy)
				return i, true
			}
		}
		if !announced {
			// Every slot busy: announce the wait, then scan once more (a
			// put between the scan and the announcement sent no wake).
			s.waiting.Store(true)
			announced = true
			continue
		}
		select {
		case <-s.wake:
			announced = false
		case <-ctx.Done():
			return 0, false
		}
	}
}

// put frees slot i: its message is no longer held by the producer.
func (s *slots) put(i int) {
	s.busy[i].Store(false)
	if s.waiting.CompareAndSwap(true, false) {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}
