package core

import (
	"math/rand/v2"
	"time"
)

// backoff is the pump's wait before it dials again: exponential, with full
// jitter, between the ReconnectBackoff bounds. Only the pump uses it.
//
// A failed dial or handshake doubles the bound, and so does a connection
// that ended before it proved healthy: one that stayed up for less than the
// bound. A broker that accepts the HELLO and fails the connection at once
// (a store that refuses every append, a sequence ID it refuses) is so
// retried with growing waits, not in a loop. A connection that stayed up at
// least as long as the bound resets it to min, and is redialed at once.
// Either way a connection attempt follows the previous one by at least min:
// the producer never dials more than once per min.
//
//	dial fails       wait in [min, bound], bound = min(2*bound, max)
//	up < bound       wait in [min, bound], bound = min(2*bound, max)
//	up >= bound      no wait, bound = min
type backoff struct {
	min, max time.Duration
	bound    time.Duration // the longest next wait
}

func newBackoff(min, max time.Duration) backoff {
	return backoff{min: min, max: max, bound: min}
}

// failed returns how long to wait after a failed attempt, and doubles the
// bound.
func (b *backoff) failed() time.Duration {
	d := b.min + rand.N(b.bound-b.min+1) // full jitter
	b.bound = min(b.bound*2, b.max)
	return d
}

// ended returns how long to wait after a connection that stayed up for up:
// 0 (and the bound back at min) if that proved it healthy, else as failed.
func (b *backoff) ended(up time.Duration) time.Duration {
	if up >= b.bound {
		b.bound = b.min
		return 0
	}
	return b.failed()
}
