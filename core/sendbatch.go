package core

import "context"

// batchClaim is the most messages SendBatch claims room for at once: the
// sizes of one claim live on its stack.
const batchClaim = 64

// SendBatch enqueues msgs in order, as one goroutine calling SendAsync(ctx,
// msg, cb) for each would, but claims room for up to 64 messages at a time
// with one atomic step where SendAsync takes one per message.
//
// It returns n, the number of messages it enqueued, which are always the
// first n: msgs[:n]. cb runs exactly once for each of msgs[:n], on the
// producer's callback goroutine, as for SendAsync, and never for msgs[n:].
// err is nil if and only if n == len(msgs); otherwise it says why msgs[n]
// was not enqueued, with the errors SendAsync returns: ErrNilMessage,
// ErrInvalidMessage, ErrMessageTooLarge, ErrClosed, ErrFenced, ErrQueueFull
// (BlockIfFull false), ErrTimeout or ctx's error (after waiting for room).
// ErrNilCallback and ErrNilContext enqueue nothing. A caller that wants
// every message sent retries from msgs[n:] after handling err.
//
// Messages of one SendBatch keep their order (their sequence IDs grow
// with their index) but need not be consecutive: other goroutines' messages
// may come between them. Each message has its own deadline, as if sent by
// SendAsync when SendBatch reached it; ctx bounds the life of every
// message. With BlockIfFull, SendBatch waits for room like SendAsync; the
// messages enqueued before the wait are already on their way.
//
// SendBatch is safe for concurrent use and allocation-free for a ctx that
// can never end. The ownership rules of Message hold for each message.
func (p *Producer) SendBatch(ctx context.Context, msgs []*Message, cb Callback) (n int, err error) {
	switch {
	case cb == nil:
		return 0, ErrNilCallback
	case ctx == nil:
		return 0, ErrNilContext
	}
	var sizes [batchClaim]int64
	for n < len(msgs) {
		// Validate the next run; verr stops it at the first bad message.
		// A run is of one topic: it ends where the next message's begins.
		k := 0
		var verr error
		topic := ""
		if m := msgs[n]; m != nil {
			topic = m.Topic
		}
		for ; k < len(sizes) && n+k < len(msgs); k++ {
			m := msgs[n+k]
			if m == nil {
				verr = ErrNilMessage
				break
			}
			if m.Topic != topic && !(p.isDefault(m.Topic) && p.isDefault(topic)) {
				break
			}
			size, err := p.cfg.validate(m)
			if err != nil {
				verr = err
				break
			}
			sizes[k] = int64(size)
		}
		if k == 0 {
			return n, verr
		}
		_, _, got, err := p.enqueue(ctx, topic, msgs[n:n+k], sizes[:k], cb, nil, p.cfg.blockIfFull)
		if err != nil {
			return n, err
		}
		n += got
		if got == k && verr != nil {
			return n, verr
		}
	}
	return n, nil
}

// isDefault reports whether a message's topic is the producer's Topic.
func (p *Producer) isDefault(topic string) bool { return topic == "" || topic == p.cfg.topic }
