package core

import (
	"context"
	"runtime"
	"sync"
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
// enqueued: ErrNilMessage, ErrNilCallback, ErrNilContext, ErrInvalidMessage,
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
	return p.send(ctx, msg, cb, p.cfg.blockIfFull)
}

// TrySendAsync is SendAsync that never waits: when the queue is full it
// returns ErrQueueFull at once, whatever BlockIfFull says.
func (p *Producer) TrySendAsync(ctx context.Context, msg *Message, cb Callback) error {
	return p.send(ctx, msg, cb, false)
}

// Send enqueues msg and waits for its outcome: the message's ID once the
// broker stored it, or the error its callback would have received, or the
// error SendAsync would have returned. It returns no later than the
// message's deadline (plus the sweeper's latency).
func (p *Producer) Send(ctx context.Context, msg *Message) (MessageID, error) {
	w := waiters.Get().(*waiter)
	defer waiters.Put(w)
	if err := p.SendAsync(ctx, msg, w.cb); err != nil {
		return 0, err
	}
	r := <-w.ch
	return r.id, r.err
}

type result struct {
	id  MessageID
	err error
}

// waiter carries one Send's outcome. Its callback is created once, so a
// pooled waiter makes Send allocation-free.
type waiter struct {
	ch chan result
	cb Callback
}

var waiters = sync.Pool{New: func() any {
	w := &waiter{ch: make(chan result, 1)}
	w.cb = func(id MessageID, _ *Message, err error) { w.ch <- result{id, err} }
	return w
}}

func (p *Producer) send(ctx context.Context, msg *Message, cb Callback, block bool) error {
	switch {
	case ctx == nil:
		return ErrNilContext
	case msg == nil:
		return ErrNilMessage
	case cb == nil:
		return ErrNilCallback
	}
	size, err := p.cfg.validate(msg)
	if err != nil {
		return err
	}
	done := ctx.Done()
	if done != nil {
		if err := ctx.Err(); err != nil {
			return err
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
			return ErrQueueFull
		case ringbuf.ErrClosed:
			return ErrClosed
		}
		return err
	}

	s := p.ring.Slot(pos)
	s.Value = entry{msg: msg, payload: msg.Payload, cb: cb}
	s.SetDeadline(deadline)
	if done != nil {
		// Registered before Publish, so it may fire first: Resolve waits
		// for the publish.
		s.Value.ctx = ctx
		s.Value.stop = context.AfterFunc(ctx, func() {
			if _, ok := p.ring.Resolve(pos, ringbuf.Canceled); ok {
				p.failed(pos)
			}
		})
	}
	p.ring.Publish(pos)
	if waited {
		p.enteredLate(pos, deadline)
	}
	return nil
}

// claimWait waits for room until the deadline, ctx's end or Close.
func (p *Producer) claimWait(ctx context.Context, size, deadline int64) (uint64, error) {
	for range 4 { // the dispatcher is often about to release: yield first
		runtime.Gosched()
		if pos, err := p.ring.TryClaim(size); err != ringbuf.ErrFull {
			return pos, err
		}
	}
	wait := time.Duration(deadline - p.preciseNow())
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
	switch {
	case deadline <= now:
		if _, ok := p.ring.Resolve(pos, ringbuf.Expired); ok {
			p.failed(pos)
		}
	case deadline < now+int64(p.cfg.sendTimeout-lateSlack):
		p.late.push(pos, deadline)
		select {
		case p.sweepWake <- struct{}{}:
		default:
		}
	}
}

// failed queues pos, just resolved as a failure, for the dispatcher.
func (p *Producer) failed(pos uint64) {
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
