package core

import (
	"context"
	"time"

	"github.com/inflightmq/inflight/ringbuf"
)

// SendAsync enqueues msg and returns at once, unless the queue is full (see
// BlockIfFull). cb runs exactly once, on the producer's callback goroutine,
// if and only if SendAsync returns nil: with the message's ID when the
// broker stored it, or with one of the errors Callback lists.
//
// SendAsync returns an error, and never calls cb, when the message was not
// enqueued: ErrNilMessage, ErrNilCallback, ErrNilContext, ErrInvalidMessage,
// ErrMessageTooLarge, ErrClosed, ErrFenced (a newer instance of the name
// took it over), ErrQueueFull (BlockIfFull false), and, when it waited for
// room, ErrTimeout (SendTimeout or ctx's deadline passed; see ErrTimeout)
// or context.Canceled. A ctx that has already ended is refused the same
// way.
//
// ctx bounds the whole life of the message, not only the call: if it ends
// before the broker stored the message, cb gets ErrTimeout matching
// context.DeadlineExceeded (a deadline) or ctx.Err() (a cancellation). A
// context that can never end (context.Background) costs nothing.
//
// SendAsync is safe for concurrent use. Messages from one goroutine keep
// their order; see the package doc for the guarantees.
func (p *Producer) SendAsync(ctx context.Context, msg *Message, cb Callback) error {
	if cb == nil {
		return ErrNilCallback
	}
	_, _, err := p.send(ctx, msg, cb, nil, p.cfg.blockIfFull)
	return err
}

// TrySendAsync is SendAsync that never waits: when the queue is full it
// returns ErrQueueFull at once, whatever BlockIfFull says.
func (p *Producer) TrySendAsync(ctx context.Context, msg *Message, cb Callback) error {
	if cb == nil {
		return ErrNilCallback
	}
	_, _, err := p.send(ctx, msg, cb, nil, false)
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
	l, pos, err := p.send(ctx, msg, nil, w, p.cfg.blockIfFull)
	if err != nil {
		return 0, err
	}
	st := <-w.ch
	if st == ringbuf.Acked {
		return w.id, nil // the ID when it was acknowledged (see ledger.notify)
	}
	if st != ringbuf.Rejected {
		p.detachPayloads(nil) // its frame may be being written: msg is the caller's once Send returns
	}
	return p.outcome(l, pos, st, ctx)
}

// send enqueues msg with either a callback or a Send's waiter and returns
// its lane and position.
func (p *Producer) send(ctx context.Context, msg *Message, cb Callback, w *waiter, block bool) (*lane, uint64, error) {
	switch {
	case ctx == nil:
		return nil, 0, ErrNilContext
	case msg == nil:
		return nil, 0, ErrNilMessage
	}
	size, err := p.cfg.validate(msg)
	if err != nil {
		return nil, 0, err
	}
	msgs, sizes := [1]*Message{msg}, [1]int64{int64(size)}
	l, pos, _, err := p.enqueue(ctx, msg.Topic, msgs[:], sizes[:], cb, w, block)
	return l, pos, err
}

// enqueue puts a run of validated messages of one topic (sizes[i] bytes
// for msgs[i]) into its lane's ledger for SendAsync, Send and SendBatch: as
// many as there is room for, at least one unless it returns an error, all
// with the deadline counted from now, callback cb or (for one message)
// Send's waiter w. With block it waits for room while not even the first
// fits. It returns the lane, the first position and how many it enqueued.
func (p *Producer) enqueue(ctx context.Context, topic string, msgs []*Message, sizes []int64, cb Callback, w *waiter, block bool) (*lane, uint64, int, error) {
	var cctx context.Context // what the entries keep: nil when ctx can never end
	if ctx.Done() != nil {
		if ctx.Err() != nil {
			return nil, 0, 0, p.ctxFailure(ctx)
		}
		cctx = ctx
	}
	deadline := p.now() + int64(p.cfg.sendTimeout)
	for {
		l, err := p.laneFor(topic)
		if err != nil {
			return nil, 0, 0, err
		}
		first, n, waited, err := l.led.claim(ctx, sizes, deadline, block, p.preciseNow, p.newTimer)
		if err == ErrClosed && l.retired.Load() {
			continue // forgotten meanwhile (see retire): its successor takes it
		}
		if err != nil {
			if f := p.fenced.Load(); f != nil && err == ErrClosed && !p.closing.Load() {
				err = *f // the ledger was closed by the fence, not by Close
			}
			switch {
			case err == ErrTimeout: // it waited for room until SendTimeout
				err = p.timeout()
			case ctx.Err() != nil && err == ctx.Err(): // or until ctx ended
				err = p.ctxFailure(ctx)
			}
			return nil, 0, 0, err
		}
		l.led.publish(first, msgs[:n], cb, cctx, deadline, w)
		if l != p.def {
			l.used(deadline - int64(p.cfg.sendTimeout))
		}
		p.kickPump(l)
		if waited {
			now := p.preciseNow()
			for pos := first; pos < first+uint64(n); pos++ {
				l.led.enteredLate(pos, deadline, now)
			}
		}
		return l, first, n, nil
	}
}

// newTimer starts a timer on the producer's clock: its channel and its stop.
func (p *Producer) newTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := p.clock.NewTimer(d)
	return t.C(), t.Stop
}
