package core

// Deadlines in the ring are SendAsync's clock reading plus SendTimeout. On
// the system clock that reading comes from the coarse clock, which may be
// stale; these helpers turn it into a time that is never early (see
// coarseClock). On any other clock the reading is exact.

// due reports whether the message whose slot deadline is d has expired at
// the precise time now; if not, next is when to look again.
func (p *Producer) due(d, now int64) (expired bool, next int64) {
	if d > now {
		return false, d // the true expiry is never before d
	}
	if !p.coarse {
		return true, 0
	}
	timeout := int64(p.cfg.sendTimeout)
	sent, ok := coarse.Upper(d - timeout)
	switch {
	case !ok:
		return false, now + int64(coarseTick)
	case sent+timeout <= now:
		return true, 0
	}
	return false, sent + timeout
}

// expiry returns the precise time by which the message with slot deadline
// d expires, counted from now when the coarse clock cannot tell yet.
func (p *Producer) expiry(d, now int64) int64 {
	if !p.coarse {
		return d
	}
	timeout := int64(p.cfg.sendTimeout)
	if sent, ok := coarse.Upper(d - timeout); ok {
		return sent + timeout
	}
	return now + timeout // the message was sent before now
}

// silence returns how long before now the frame stamped (with p.now) at
// stamp arrived, never more than the truth.
func (p *Producer) silence(stamp, now int64) int64 {
	if !p.coarse {
		return now - stamp
	}
	arrived, ok := coarse.Upper(stamp)
	if !ok {
		return 0
	}
	return now - arrived
}
