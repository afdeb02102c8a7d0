package core

import (
	"fmt"

	"github.com/inflightmq/inflight/ringbuf"
)

// releaseEvery bounds how many positions the dispatcher walks before it
// releases them, so blocked senders get room while a long run of callbacks
// is still going.
const releaseEvery = 1024

// dispatcher is the state of the callback goroutine. There is one such
// goroutine at a time: New starts it, and if a callback ends it with
// runtime.Goexit, a new one takes over this state where the old one stopped
// (see call). Only the current dispatcher goroutine touches these fields.
type dispatcher struct {
	next  uint64   // every position below was delivered (and may be released)
	fails []uint64 // failed positions taken from the queue, not yet delivered
	spare []uint64 // the backing array of the last taken queue, for reuse
}

// runDispatcher runs every callback, on this one goroutine:
//
//   - in order from head: each position that is resolved (acked, rejected
//     or failed) gets its callback, then head moves past it; it stops at the
//     first position still pending;
//   - out of order: positions that failed beyond that point (deadline,
//     context, Close) are queued by whoever failed them, and get their
//     callback at once, then are marked Done so the in-order walk skips
//     them.
//
// After Close closed stopDisp, it delivers what is left (everything is
// resolved by then), closes closed and returns.
func (p *Producer) runDispatcher() {
	p.dispGoid.Store(goid())
	for {
		p.dispatch()
		select {
		case <-p.stopDisp:
			if p.ring.Head() >= p.ring.Tail() {
				close(p.closed)
				return
			}
			continue
		default:
		}
		select {
		case <-p.dispatchWake:
		case <-p.stopDisp:
		}
	}
}

// onDispatcher reports whether the caller runs on the callback goroutine,
// that is, inside a callback.
func (p *Producer) onDispatcher() bool { return goid() == p.dispGoid.Load() }

// dispatch delivers everything that is ready: queued failures, then the
// in-order walk.
func (p *Producer) dispatch() {
	d := &p.disp
	p.deliverFails() // left by a goroutine that exited in a callback
	p.failMu.Lock()
	d.fails, p.fails = p.fails, d.spare[:0]
	p.failMu.Unlock()
	d.spare = d.fails
	p.deliverFails()
	p.walk()
}

// deliverFails delivers the taken failures that the walk has not.
func (p *Producer) deliverFails() {
	d := &p.disp
	head := p.ring.Head()
	for len(d.fails) > 0 {
		pos := d.fails[0]
		d.fails = d.fails[1:] // before the callback: it may end this goroutine
		// Below next, the in-order walk already delivered it (a position
		// can be failed, then walked, then queued here).
		if st := p.ring.State(pos); pos >= head && pos >= d.next && st.Failed() {
			p.ring.Transition(pos, st, ringbuf.Done)
			p.deliver(pos, st)
		}
	}
}

// walk delivers resolved positions from the last delivered one in order and
// releases them. Everything it delivers is below head when it returns.
func (p *Producer) walk() {
	d := &p.disp
	head := p.ring.Head()
	d.next = max(d.next, head)
	for {
		pos := d.next
		st := p.ring.State(pos)
		if !st.Final() {
			break
		}
		d.next = pos + 1 // before the callback: it may end this goroutine
		if st != ringbuf.Done {
			p.deliver(pos, st)
		}
		if d.next-head >= releaseEvery {
			p.ring.Release(d.next)
			head = d.next
		}
	}
	p.ring.Release(d.next)
}

// outcome returns what a message resolved in state st reports. Canceled is
// the caller's to map (it needs the message's context).
func (p *Producer) outcome(pos uint64, st ringbuf.State) (MessageID, error) {
	switch st {
	case ringbuf.Acked:
		return p.id(pos), nil
	case ringbuf.Expired:
		return 0, ErrTimeout
	case ringbuf.Rejected:
		return 0, ErrMessageTooLarge
	default:
		return 0, ErrClosed
	}
}

// deliver runs the callback of pos, resolved in state st, and counts it. A
// Send's position has no callback: its Send was notified when it resolved.
func (p *Producer) deliver(pos uint64, st ringbuf.State) {
	e := &p.ring.Slot(pos).Value
	if e.stop != nil {
		e.stop()
	}
	id, err := p.outcome(pos, st)
	switch st {
	case ringbuf.Acked:
		p.stats.acked.Add(1)
	case ringbuf.Expired:
		p.stats.timedOut.Add(1)
	case ringbuf.Canceled:
		err = e.ctx.Err()
		p.stats.canceled.Add(1)
	default:
		p.stats.failed.Add(1)
	}
	if e.cb == nil {
		p.waitNotified(pos)
		return
	}
	p.call(e.cb, id, e.msg, err)
}

// call runs one callback. A panic is recovered and reported. A callback
// that ends its goroutine (runtime.Goexit, as t.FailNow does) cannot be
// stopped from doing so: a new dispatcher goroutine takes over, reported
// with ErrCallbackExit, and carries on from the next position.
func (p *Producer) call(cb Callback, id MessageID, msg *Message, err error) {
	returned := false
	defer func() {
		if returned {
			return
		}
		if v := recover(); v != nil {
			p.report(fmt.Errorf("%w: %v", ErrCallbackPanic, v))
			return
		}
		p.report(ErrCallbackExit)
		p.dispWG.Go(p.runDispatcher)
	}()
	cb(id, msg, err)
	returned = true
}
