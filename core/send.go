package core

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inflightmq/inflight/ringbuf"
)

// lateSlack is how much earlier than a fresh message's deadline a message
// may enter the ring before the sweeper must be told: the sweeper scans the
// ring in order and stops at the first deadline in the future, which is
// right only while deadlines grow with position. Messages that waited for
// room break that; they go into the late queue instead.
const lateSlack = 5 * time.Millisecond

// SendAsync enqueues msg and returns at once, unless the queue is full (see
// BlockIfFull). cb runs exactly once, on the producer's callback goroutine,
// if and only if SendAsync returns nil: with the message's ID when the
// broker stored it, or with ErrTimeout, ErrClosed, ErrMessageTooLarge or
// ctx's error.
//
// SendAsync returns an error, and never calls cb, when the message was not
// enqueued: ErrNilMessage, ErrNilCallback, ErrNilContext,
// ErrMessageTooLarge, ErrClosed, ErrQueueFull (BlockIfFull false), and, when
// it waited for room, ErrTimeout (SendTimeout elapsed) or ctx's error.
//
// ctx bounds the whole life of the message, not only the call: if it ends
// before the broker stored the message, cb gets ctx.Err(). A context that
// can never end (context.Background) costs nothing.
//
// SendAsync is safe for concurrent use. Messages from one goroutine keep
// their order; see the package doc for the guarantees.
func (p *Producer) SendAsync(ctx context.Context, msg *Message, cb Callback) error {
	if cb == nil {
		return ErrNilCallback
	}
	_, err := p.send(ctx, msg, cb, nil, p.cfg.blockIfFull)
	return err
}

// TrySendAsync is SendAsync that never waits: when the queue is full it
// returns ErrQueueFull at once, whatever BlockIfFull says.
func (p *Producer) TrySendAsync(ctx context.Context, msg *Message, cb Callback) error {
	if cb == nil {
		return ErrNilCallback
	}
	_, err := p.send(ctx, msg, cb, nil, false)
	return err
}

// Send enqueues msg and waits for its outcome: the message's ID once the
// broker stored it, or the error a callback would have received, or the
// error SendAsync would have returned. Send learns the outcome when the
// message resolves, not through the callback goroutine: it returns by the
// message's deadline (plus scheduling latency) even while a callback blocks,
// and it may be called from a callback. It does not wait for the callbacks
// of earlier messages. Send is safe for concurrent use and allocation-free.
func (p *Producer) Send(ctx context.Context, msg *Message) (MessageID, error) {
	w := waiters.Get().(*waiter)
	defer waiters.Put(w)
	pos, err := p.send(ctx, msg, nil, w, p.cfg.blockIfFull)
	if err != nil {
		return 0, err
	}
	st := <-w.ch
	if st == ringbuf.Canceled {
		return 0, ctx.Err()
	}
	return p.outcome(pos, st)
}

// waiter receives one Send's resolved state. It is handed over through the
// producer's waits array (see notify), so it can be pooled: nobody holds it
// once its state was sent.
type waiter struct {
	ch  chan ringbuf.State // capacity 1
	pos atomic.Uint64      // the position it waits for
}

var waiters = sync.Pool{New: func() any { return &waiter{ch: make(chan ringbuf.State, 1)} }}

// notify hands the resolved state st of pos to its Send, if pos is a Send's.
// Only the goroutine that resolved pos calls it, and the dispatcher does not
// release a Send's position before it ran (see waitNotified), so waits[pos]
// cannot have been reused for a later position of a Send meanwhile; a later
// SendAsync position never sets it.
func (p *Producer) notify(pos uint64, st ringbuf.State) {
	ref := &p.waits[pos&p.waitMask]
	w := ref.Load()
	if w == nil || w.pos.Load() != pos {
		return
	}
	ref.Store(nil)
	w.ch <- st
}

// waitNotified waits until the Send of pos, resolved, has been notified:
// the goroutine that resolved it calls notify right after. The dispatcher
// calls it before it releases pos.
func (p *Producer) waitNotified(pos uint64) {
	ref := &p.waits[pos&p.waitMask]
	for {
		w := ref.Load()
		if w == nil || w.pos.Load() != pos {
			return
		}
		runtime.Gosched()
	}
}

// send enqueues msg with either a callback or a Send's waiter and returns
// its position.
func (p *Producer) send(ctx context.Context, msg *Message, cb Callback, w *waiter, block bool) (uint64, error) {
	switch {
	case ctx == nil:
		return 0, ErrNilContext
	case msg == nil:
		return 0, ErrNilMessage
	}
	size := len(msg.Payload)
	if size > p.cfg.maxMessageSize() {
		return 0, fmt.Errorf("%w: %d bytes, limit %d", ErrMessageTooLarge, size, p.cfg.maxMessageSize())
	}
	done := ctx.Done()
	if done != nil {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
	}
	deadline := p.now() + int64(p.cfg.sendTimeout)
	pos, err := p.ring.TryClaim(int64(size))
	waited := false
	if err == ringbuf.ErrFull && block {
		waited = true
		pos, err = p.claimWait(ctx, int64(size), deadline)
	}
	if err != nil {
		switch err {
		case ringbuf.ErrFull:
			return 0, ErrQueueFull
		case ringbuf.ErrClosed:
			return 0, ErrClosed
		}
		return 0, err
	}

	if w != nil {
		w.pos.Store(pos)
		p.waits[pos&p.waitMask].Store(w)
	}
	s := p.ring.Slot(pos)
	s.Value = entry{msg: msg, payload: msg.Payload, cb: cb}
	s.SetDeadline(deadline)
	if done != nil {
		// Registered before Publish, so it may fire first: Resolve waits
		// for the publish.
		s.Value.ctx = ctx
		s.Value.stop = context.AfterFunc(ctx, func() {
			if prev, ok := p.ring.Resolve(pos, ringbuf.Canceled); ok {
				p.failed(pos, prev, ringbuf.Canceled)
			}
		})
	}
	p.ring.Publish(pos)
	if waited {
		p.enteredLate(pos, deadline)
	}
	return pos, nil
}

// claimWait waits for room until the deadline, ctx's end or Close.
func (p *Producer) claimWait(ctx context.Context, size, deadline int64) (uint64, error) {
	for range 4 { // the dispatcher is often about to release: yield first
		runtime.Gosched()
		if pos, err := p.ring.TryClaim(size); err != ringbuf.ErrFull {
			return pos, err
		}
	}
	now := p.preciseNow()
	wait := time.Duration(p.expiry(deadline, now) - now)
	if wait <= 0 {
		return 0, ErrTimeout
	}
	timer := p.clock.NewTimer(wait)
	defer timer.Stop()
	for {
		room := p.ring.ArmRoom()
		pos, err := p.ring.TryClaim(size)
		if err != ringbuf.ErrFull {
			p.ring.DisarmRoom()
			return pos, err
		}
		select {
		case <-room:
			p.ring.DisarmRoom()
		case <-ctx.Done():
			p.ring.DisarmRoom()
			return 0, ctx.Err()
		case <-timer.C():
			p.ring.DisarmRoom()
			return 0, ErrTimeout
		}
	}
}

// enteredLate handles a message that waited for room: its deadline may be
// earlier than those of messages ahead of it in the ring.
func (p *Producer) enteredLate(pos uint64, deadline int64) {
	now := p.preciseNow()
	expired, _ := p.due(deadline, now)
	switch {
	case expired:
		if prev, ok := p.ring.Resolve(pos, ringbuf.Expired); ok {
			p.failed(pos, prev, ringbuf.Expired)
		}
	case deadline < now+int64(p.cfg.sendTimeout-lateSlack):
		p.late.push(pos, deadline)
		select {
		case p.sweepWake <- struct{}{}:
		default:
		}
	}
}

// failed is called by the goroutine that just resolved pos as the failure
// st, from state prev: it hands st to a Send and queues pos for the
// dispatcher, which reports it at once (the documented exception to
// ordering).
func (p *Producer) failed(pos uint64, prev, st ringbuf.State) {
	if prev == ringbuf.Written {
		p.unacked.Add(-1)
	}
	p.notify(pos, st)
	p.failMu.Lock()
	p.fails = append(p.fails, pos)
	p.failMu.Unlock()
	p.wakeDispatcher()
}

func (p *Producer) wakeDispatcher() {
	select {
	case p.dispatchWake <- struct{}{}:
	default:
	}
}
