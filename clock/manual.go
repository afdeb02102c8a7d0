package clock

import (
	"sync"
	"time"
)

// Manual is a Clock that moves only when Advance or Set is called. Timers
// made by it fire, in deadline order, during the call that moves the clock
// past their deadline. It is safe for concurrent use.
//
// Tests that need to know that a goroutine has armed its timer before moving
// the clock can wait for Timers to report it.
type Manual struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*manualTimer]struct{}
	armed  chan struct{} // closed and replaced whenever a timer is armed
}

// NewManual returns a manual clock that reads start.
func NewManual(start time.Time) *Manual {
	return &Manual{now: start, timers: make(map[*manualTimer]struct{}), armed: make(chan struct{})}
}

// Now returns the clock's current time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// Advance moves the clock forward by d and fires every timer whose deadline
// is reached.
func (m *Manual) Advance(d time.Duration) {
	m.mu.Lock()
	t := m.now.Add(d)
	m.mu.Unlock()
	m.Set(t)
}

// Set moves the clock to t (never backwards: an earlier t is ignored) and
// fires every timer whose deadline is reached.
func (m *Manual) Set(t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t.Before(m.now) {
		return
	}
	m.now = t
	for {
		var next *manualTimer
		for mt := range m.timers {
			if !mt.when.After(t) && (next == nil || mt.when.Before(next.when)) {
				next = mt
			}
		}
		if next == nil {
			return
		}
		delete(m.timers, next)
		select {
		case next.c <- t:
		default: // like time.Timer, a fired value nobody read is not queued twice
		}
	}
}

// Timers returns the number of armed timers.
func (m *Manual) Timers() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.timers)
}

// WaitTimers waits until at least n timers are armed or done is closed, and
// reports whether the count was reached.
func (m *Manual) WaitTimers(n int, done <-chan struct{}) bool {
	for {
		m.mu.Lock()
		k, armed := len(m.timers), m.armed
		m.mu.Unlock()
		if k >= n {
			return true
		}
		select {
		case <-armed:
		case <-done:
			return false
		}
	}
}

// NewTimer returns a timer that fires when the clock reaches Now()+d.
func (m *Manual) NewTimer(d time.Duration) Timer {
	mt := &manualTimer{m: m, c: make(chan time.Time, 1)}
	mt.Reset(d)
	return mt
}

type manualTimer struct {
	m    *Manual
	c    chan time.Time
	when time.Time
}

func (t *manualTimer) C() <-chan time.Time { return t.c }

func (t *manualTimer) Stop() bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	_, ok := t.m.timers[t]
	delete(t.m.timers, t)
	return ok
}

func (t *manualTimer) Reset(d time.Duration) bool {
	m := t.m
	m.mu.Lock()
	_, active := m.timers[t]
	// Like a Go 1.23 timer: a value not yet received is discarded on Reset.
	select {
	case <-t.c:
	default:
	}
	t.when = m.now.Add(d)
	if d <= 0 {
		delete(m.timers, t)
		t.c <- m.now
		m.mu.Unlock()
		return active
	}
	m.timers[t] = struct{}{}
	close(m.armed)
	m.armed = make(chan struct{})
	m.mu.Unlock()
	return active
}
