package core

import (
	"runtime"

	"github.com/inflightmq/inflight/ringbuf"
)

// resolve marks every written position whose sequence ID is <= seq as
// acknowledged (the broker's receipts are cumulative) and wakes the
// dispatcher. It runs on a transport goroutine and never blocks.
//
// Positions never handed to a connection are not acknowledged, whatever the
// broker says. Two resolvers may overlap (an old connection's last receipt
// and a new one's): each position changes state once (CAS), and acked only
// moves forward after the caller itself made sure every position below its
// target is resolved.
func (p *Producer) resolve(seq uint64) {
	base := p.seqBase.Load()
	if seq <= base {
		return
	}
	upto := min(seq-base, p.maxWritten.Load())
	from := max(p.acked.Load(), p.ring.Head())
	if upto <= from {
		return
	}
	acked := int64(0)
	for pos := from; pos < upto; pos++ {
		if p.ack(pos) {
			acked++
		}
	}
	p.unacked.Add(-acked)
	for {
		cur := p.acked.Load()
		if cur >= upto || p.acked.CompareAndSwap(cur, upto) {
			break
		}
	}
	p.wakeDispatcher()
}

// ack moves pos from Written to Acked and reports whether it did. A
// position below maxWritten is Written, Writing (being resent: wait for it)
// or already resolved.
func (p *Producer) ack(pos uint64) bool {
	for {
		switch p.ring.State(pos) {
		case ringbuf.Written:
			if p.ring.Transition(pos, ringbuf.Written, ringbuf.Acked) {
				p.notify(pos, ringbuf.Acked)
				return true
			}
		case ringbuf.Writing:
			runtime.Gosched()
		default:
			return false
		}
	}
}
