package core

import (
	"fmt"

	"github.com/inflightmq/inflight/ringbuf"
)

// releaseEvery bounds how many positions the dispatcher walks before it
// releases them, so blocked senders get room while a long run of callbacks
// is still going.
const releaseEvery = 1024

// runDispatcher runs every callback, on this one goroutine:
//
//   - in order from head: each position that is resolved (acked or failed)
//     gets its callback, then head moves past it; it stops at the first
//     position still pending;
//   - out of order: positions that failed beyond that point (deadline,
//     context, Close) are queued by whoever failed them, and get their
//     callback at once, then are marked Done so the in-order walk skips
//     them.
//
// It stops when Close closes stopDisp, after the last callback.
func (p *Producer) runDispatcher() {
	var spare []uint64
	for {
		select {
		case <-p.dispatchWake:
		case <-p.stopDisp:
			return
		}
		p.failMu.Lock()
		fails := p.fails
		p.fails = spare[:0]
		p.failMu.Unlock()
		head := p.ring.Head()
		for _, pos := range fails {
			// Below head, the in-order walk already delivered it (a
			// position can be failed, then walked, then queued here).
			if st := p.ring.State(pos); pos >= head && st.Failed() {
				p.deliver(pos, st)
				p.ring.Transition(pos, st, ringbuf.Done)
			}
		}
		spare = fails
		p.walk()
	}
}

// walk delivers resolved positions from head in order and releases them.
// Everything it delivers is below head when it returns.
func (p *Producer) walk() {
	head := p.ring.Head()
	pos := head
	for {
		st := p.ring.State(pos)
		if !st.Final() {
			break
		}
		if st != ringbuf.Done {
			p.deliver(pos, st)
		}
		pos++
		if pos-head >= releaseEvery {
			p.ring.Release(pos)
			head = pos
		}
	}
	p.ring.Release(pos)
}

// deliver runs the callback of pos, resolved in state st.
func (p *Producer) deliver(pos uint64, st ringbuf.State) {
	e := &p.ring.Slot(pos).Value
	if e.stop != nil {
		e.stop()
	}
	var id MessageID
	var err error
	switch st {
	case ringbuf.Acked:
		id = p.id(pos)
		p.stats.acked.Add(1)
	case ringbuf.Expired:
		err = ErrTimeout
		p.stats.timedOut.Add(1)
	case ringbuf.Canceled:
		err = e.ctx.Err()
		p.stats.canceled.Add(1)
	case ringbuf.Rejected:
		err = ErrMessageTooLarge
		p.stats.failed.Add(1)
	default:
		err = ErrClosed
		p.stats.failed.Add(1)
	}
	p.call(e.cb, id, e.msg, err)
}

func (p *Producer) call(cb Callback, id MessageID, msg *Message, err error) {
	defer func() {
		if v := recover(); v != nil {
			p.report(fmt.Errorf("%w: %v", ErrCallbackPanic, v))
		}
	}()
	cb(id, msg, err)
}
