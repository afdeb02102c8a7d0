package broker

import (
	"runtime"
	"sync"

	"github.com/inflightmq/inflight/wire"
)

// receipts coalesces the receipts of a session's topics into RECEIPT
// frames of several entries, with no goroutine of its own: the topic
// goroutine that finds nobody sending sends what is pending, and goes on
// sending while other topics add entries meanwhile; those only add theirs
// and go back to their Appends.
//
//	topic a: Append ... ack(a,7)  send [a:7] ........ send [b:3 c:9] | back to Appends
//	topic b: Append ........ ack(b,3) (a sends it)
//	topic c: Append ........... ack(c,9) (a sends it)
//
// A topic has at most one pending entry, raised by later acks (receipts
// are cumulative), so the pending list is bounded by the session's topics.
type receipts struct {
	mu      sync.Mutex
	pending []wire.Receipt // at most one per topic
	of      []*topic       // of[i] is the topic of pending[i]
	sending bool           // a topic goroutine is sending: it sends what is added meanwhile

	// The sender's (one at a time):
	spare   []wire.Receipt
	spareOf []*topic
	out     []byte
}

// ack acknowledges every record of t up to seq, in the next RECEIPT frame
// the session sends (on this goroutine if no other is sending). A Send
// error fails the session and closes the peer.
func (s *Session) ack(t *topic, seq uint64) {
	r := &s.acks
	r.mu.Lock()
	if t.ackAt > 0 {
		e := &r.pending[t.ackAt-1]
		e.Seq = max(e.Seq, seq)
	} else {
		r.pending = append(r.pending, wire.Receipt{Topic: t.id, Seq: seq})
		r.of = append(r.of, t)
		t.ackAt = len(r.pending)
	}
	if r.sending {
		r.mu.Unlock()
		return
	}
	r.sending = true
	if s.mixed() {
		// Several topics in play: let the goroutines that can run now
		// (the reader with the next frames of the connection, other
		// topics whose Appends returned) add their entries before this
		// one sends: with 1000 topics over tcp each receipt took a write
		// of its own. One busy topic has nobody to wait for: it sends at
		// once, as a frame's receipt is what opens its window.
		r.mu.Unlock()
		runtime.Gosched()
		r.mu.Lock()
	}
	for len(r.pending) > 0 {
		batch, of := r.pending, r.of
		for _, t := range of {
			t.ackAt = 0
		}
		r.pending, r.of = r.spare[:0], r.spareOf[:0]
		r.mu.Unlock()

		var err error
		for rest := batch; len(rest) > 0 && err == nil; {
			n := min(len(rest), wire.MaxReceiptEntries)
			r.out = wire.AppendReceipts(r.out[:0], rest[:n])
			err = s.peer.Send(r.out)
			rest = rest[n:]
		}
		clear(of)
		if cap(batch) > maxKeptReceipts {
			batch, of = nil, nil
		}

		r.mu.Lock()
		r.spare, r.spareOf = batch[:0], of[:0]
		if err != nil {
			r.sending = false
			r.mu.Unlock()
			s.abort(err)
			_ = s.peer.Close()
			return
		}
	}
	r.sending = false
	r.mu.Unlock()
}

// maxKeptReceipts bounds the pending lists a session keeps between bursts.
const maxKeptReceipts = 256
