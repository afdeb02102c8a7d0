package core

import (
	"fmt"
	"sync/atomic"

	"github.com/inflightmq/inflight/ringbuf"
)

// MemoryLimit is a byte budget that several producers in one process
// share (as Pulsar's client-wide MemoryLimitBytes): every message pending
// in any producer given it (see WithMemoryLimit) counts its bytes, payload
// plus metadata, against it, besides the producer's own MaxPendingBytes.
// When it is spent, SendAsync waits or fails with ErrQueueFull as it does
// for a full producer. One message larger than the whole limit is still
// accepted when nothing else holds any of it. Safe for concurrent use; the
// zero value is not usable: call NewMemoryLimit.
type MemoryLimit struct {
	limit int64
	used  atomic.Int64
	room  ringbuf.Signal
}

// NewMemoryLimit returns a MemoryLimit of bytes bytes, or an error wrapping
// ErrInvalidOption if bytes is not positive.
func NewMemoryLimit(bytes int64) (*MemoryLimit, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("%w: MemoryLimit %d: must be positive", ErrInvalidOption, bytes)
	}
	return &MemoryLimit{limit: bytes}, nil
}

// Limit returns the limit in bytes.
func (m *MemoryLimit) Limit() int64 { return m.limit }

// Used returns the bytes pending now, in every producer that shares m.
func (m *MemoryLimit) Used() int64 { return m.used.Load() }

func (m *MemoryLimit) take(bytes int64) bool {
	if bytes == 0 {
		return true
	}
	if u := m.used.Load(); u > 0 && u+bytes > m.limit {
		return false // refused without touching the count: no waiter to wake
	}
	if n := m.used.Add(bytes); n > m.limit && n != bytes {
		m.give(bytes)
		return false
	}
	return true
}

func (m *MemoryLimit) give(bytes int64) {
	if bytes == 0 {
		return
	}
	m.used.Add(-bytes)
	m.room.Broadcast()
}

// budget is what a producer's messages may hold together, across all its
// topics: MaxPending messages and MaxPendingBytes bytes, and, if set, the
// bytes of a MemoryLimit it shares. Each topic's ring also holds a share
// of it (see MaxPendingPerTopic), so one topic the broker does not
// acknowledge cannot take all of it.
//
// take reserves optimistically (a load, then one atomic add per counter)
// and gives back what went over a limit; as the ring does, one claim is admitted when
// nothing else is reserved, so that a message larger than a limit cannot
// wait forever.
type budget struct {
	maxCount int64
	maxBytes int64
	_        [48]byte
	count    atomic.Int64
	bytes    atomic.Int64
	_        [48]byte
	shared   *MemoryLimit // nil: none
	room     ringbuf.Signal
}

func newBudget(maxCount int, maxBytes int64, shared *MemoryLimit) *budget {
	return &budget{maxCount: int64(maxCount), maxBytes: maxBytes, shared: shared}
}

// take reserves n messages of bytes bytes, or reports false and reserves
// nothing.
func (b *budget) take(n int, bytes int64) bool {
	// Clearly full: refused without touching the counters, so that a
	// refusal wakes no waiter (the claimer itself among them).
	if c := b.count.Load(); c > 0 && c+int64(n) > b.maxCount {
		return false
	}
	if by := b.bytes.Load(); by > 0 && by+bytes > b.maxBytes {
		return false
	}
	c := b.count.Add(int64(n))
	by := b.bytes.Add(bytes)
	if (c > b.maxCount && c != int64(n)) || (by > b.maxBytes && by != bytes) {
		b.undo(n, bytes)
		return false
	}
	if b.shared != nil && !b.shared.take(bytes) {
		b.undo(n, bytes)
		return false
	}
	return true
}

func (b *budget) undo(n int, bytes int64) {
	b.count.Add(-int64(n))
	b.bytes.Add(-bytes)
	b.room.Broadcast()
}

// give returns n messages of bytes bytes.
func (b *budget) give(n int, bytes int64) {
	if n == 0 && bytes == 0 {
		return
	}
	b.undo(n, bytes)
	if b.shared != nil {
		b.shared.give(bytes)
	}
}

// arm starts a wait for room in the producer's budget and the shared one:
// call disarm once after.
func (b *budget) arm() (own, shared <-chan struct{}) {
	own = b.room.Arm()
	if b.shared != nil {
		shared = b.shared.room.Arm()
	}
	return own, shared
}

func (b *budget) disarm() {
	b.room.Disarm()
	if b.shared != nil {
		b.shared.room.Disarm()
	}
}
