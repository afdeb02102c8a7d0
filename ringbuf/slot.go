package ringbuf

import "sync/atomic"

// Slot holds one position's value. The goroutine that claimed a position owns
// Value until it publishes; afterwards Value may be read by the consumer side,
// and it is cleared when the position is released. Value must not be written
// after Publish.
type Slot[T any] struct {
	state    atomic.Uint64 // pos<<stateBits | State
	deadline atomic.Int64  // owner-defined instant (inflight: ns since the producer's epoch)
	size     int64         // bytes reserved by Claim, returned by Release
	Value    T
}

// SetDeadline records d for the slot. Call it between Claim and Publish.
func (s *Slot[T]) SetDeadline(d int64) { s.deadline.Store(d) }

// Deadline returns the value recorded by SetDeadline. It may be read at any
// time; pair it with a state check for the position you expect.
func (s *Slot[T]) Deadline() int64 { return s.deadline.Load() }

// Size returns the bytes reserved for the slot by Claim.
func (s *Slot[T]) Size() int64 { return s.size }
