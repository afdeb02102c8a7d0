package core

import (
	"time"

	"github.com/inflightmq/inflight/ringbuf"
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
	var from uint64 // every position below is known to be resolved
	var due []lateEntry
	for {
		select {
		case <-t.C():
		case <-p.sweepWake:
		case <-p.stop:
			return
		}
		now := p.preciseNow()
		var next, lateNext int64
		from, next = p.expire(from, now)
		due, lateNext = p.late.due(now, due[:0])
		for _, e := range due {
			// Its true expiry may still be ahead (see due): then later.
			if expired, at := p.due(e.deadline, now); !expired {
				if p.ring.State(e.pos).Final() {
					continue
				}
				p.late.pushAt(e.pos, e.deadline, at)
				lateNext = minDeadline(lateNext, at)
				continue
			}
			if prev, ok := p.ring.Resolve(e.pos, ringbuf.Expired); ok {
				p.failed(e.pos, prev, ringbuf.Expired)
			}
		}
		if lateNext != 0 {
			next = minDeadline(next, lateNext)
		}
		wait := p.cfg.sendTimeout
		if next != 0 {
			wait = max(time.Duration(next-now), minSweep)
		}
		t.Reset(wait)
	}
}

// expire resolves as Expired every pending position, in order from from,
// whose deadline is at or before now, and stops at the first deadline still
// ahead. It returns the new scan start and that deadline (0 if none).
func (p *Producer) expire(from uint64, now int64) (uint64, int64) {
	from = max(from, p.ring.Head())
	tail := p.ring.Tail()
	resolvedPrefix := true
	for pos := from; pos < tail; pos++ {
		st := p.ring.State(pos)
		if st.Final() {
			if resolvedPrefix {
				from = pos + 1
			}
			continue
		}
		resolvedPrefix = false
		if st == ringbuf.Unpublished {
			// Claimed, about to be published; look again soon.
			return from, now + int64(minSweep)
		}
		if expired, at := p.due(p.ring.Slot(pos).Deadline(), now); !expired {
			return from, at
		}
		if prev, ok := p.ring.Resolve(pos, ringbuf.Expired); ok {
			p.failed(pos, prev, ringbuf.Expired)
		}
	}
	return from, 0
}

func minDeadline(cur, d int64) int64 {
	if cur == 0 || d < cur {
		return d
	}
	return cur
}
