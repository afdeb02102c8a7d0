package ringbuf

import "errors"

var (
	// ErrFull is returned by TryClaim when the ring holds its limit of slots
	// or of bytes.
	ErrFull = errors.New("inflight/ringbuf: ring is full")
	// ErrClosed is returned by Claim and TryClaim after Close, and by the
	// waiting methods when Close is called while they wait.
	ErrClosed = errors.New("inflight/ringbuf: ring is closed")
	// ErrCanceled is returned by the waiting methods when their done channel
	// is closed before the condition they wait for holds.
	ErrCanceled = errors.New("inflight/ringbuf: wait canceled")
	// ErrTimeout is returned by WaitPublishedUntil when its timeout
	// delivers before the position is published.
	ErrTimeout = errors.New("inflight/ringbuf: wait timed out")
	// ErrInvalidSize is returned by New for a non-positive slot or byte
	// limit, and by Claim for a negative size.
	ErrInvalidSize = errors.New("inflight/ringbuf: invalid size")
)
