package core

import (
	"time"
)

// minSweep keeps the sweeper from spinning on deadlines a hair away.
const minSweep = 200 * time.Microsecond

// runSweeper expires messages at their deadline, connection or not. It
// sleeps until the earliest deadline it knows of: deadlines grow with
// position (each is SendAsync time + SendTimeout), so a scan from the oldest
// pending position can stop at the first deadline still ahead. Messages that
// entered the ring late (after waiting for room) break that order; they are
// in the late queue, ordered by deadline, and wake the sweeper. Context
// deadlines are not its business: context.AfterFunc handles them.
func (p *Producer) runSweeper() {
	t := p.clock.NewTimer(p.cfg.sendTimeout)
	defer t.Stop()
	var due []lateEntry
	for {
		select {
		case <-t.C():
		case <-p.sweepWake:
		case <-p.stop:
			return
		}
		now := p.preciseNow()
		var next int64
		for _, l := range p.lanesSnapshot() {
			if head, tail := l.led.bounds(); head >= tail && l.led.late.empty() {
				continue
			}
			var n int64
			l.sweepFrom, n, due = l.led.expireDue(l.sweepFrom, now, due)
			if n != 0 {
				next = minDeadline(next, n)
			}
		}
		wait := p.cfg.sendTimeout
		if next != 0 {
			wait = max(time.Duration(next-now), minSweep)
		}
		t.Reset(wait)
	}
}
