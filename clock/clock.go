// Package clock abstracts time so that the producer's timeouts can be driven by
// a manual clock in tests.
//
// The producer only needs two things from time: the current instant, and
// timers that fire after a duration. System returns the real clock; Manual is
// a clock that moves only when a test tells it to.
package clock

import "time"

// Clock tells the time and makes timers. Implementations are safe for
// concurrent use.
type Clock interface {
	// Now returns the current time. Durations between two results of Now
	// must be monotonic (time.Now's monotonic reading satisfies this).
	Now() time.Time
	// NewTimer returns a timer that sends the time on its channel once d
	// has elapsed.
	NewTimer(d time.Duration) Timer
}

// Timer is the subset of *time.Timer the producer uses.
type Timer interface {
	// C is the channel on which the time is delivered when the timer fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it stopped it.
	Stop() bool
	// Reset makes the timer fire after d; it reports whether it was active.
	Reset(d time.Duration) bool
}

// System returns the clock of the operating system.
func System() Clock { return systemClock{} }

// IsSystem reports whether c is the clock returned by System. The producer
// uses it to decide whether it may replace per-message clock reads by a
// cheaper coarse clock.
func IsSystem(c Clock) bool {
	_, ok := c.(systemClock)
	return ok
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time        { return t.t.C }
func (t systemTimer) Stop() bool                 { return t.t.Stop() }
func (t systemTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }
