package core

import (
	"testing"
	"time"
)

// TestBackoffBound: failures double the bound up to max; a connection that
// stayed up for less than the bound counts as a failure, one that stayed up
// as long resets the bound and is redialed at once; every wait is in
// [min, bound].
func TestBackoffBound(t *testing.T) {
	const ms = time.Millisecond
	b := newBackoff(10*ms, 80*ms)
	check := func(what string, d, lo, hi, bound time.Duration) {
		t.Helper()
		if d < lo || d > hi {
			t.Errorf("%s: wait %v, want it in [%v, %v]", what, d, lo, hi)
		}
		if b.bound != bound {
			t.Errorf("%s: bound %v, want %v", what, b.bound, bound)
		}
	}
	for _, bound := range []time.Duration{10 * ms, 20 * ms, 40 * ms, 80 * ms, 80 * ms} {
		check("failed dial", b.failed(), 10*ms, bound, min(2*bound, 80*ms))
	}
	check("up less than the bound", b.ended(79*ms), 10*ms, 80*ms, 80*ms)
	check("up as long as the bound", b.ended(80*ms), 0, 0, 10*ms)
	check("up as long as min", b.ended(10*ms), 0, 0, 10*ms)
	check("up less than min", b.ended(9*ms), 10*ms, 10*ms, 20*ms)
	check("up right after the handshake", b.ended(0), 10*ms, 20*ms, 40*ms)
}
