package ringbuf

import "sync/atomic"

// Slot holds one position's value. The goroutine that claimed a position owns
// Value and the deadline until it publishes; afterwards they may be read by
// the consumer side, and Value is cleared when the position is released.
// Neither may be written after Publish.
type Slot[T any] struct {
	state atomic.Uint64 // pos<<stateBits | State
	// deadline is an owner-defined instant (inflight: ns since the
	// producer's epoch). A plain field, written before the publish's store
	// of state, which orders it for every reader of a published state: a
	// claimer pays one locked instruction less than an atomic store costs.
	// The one reader that may race with the slot's next use, a reader of a
	// position it does not hold, reads it through Ring.DeadlineAt.
	deadline int64
	size     int64 // bytes reserved by Claim, returned by Release
	Value    T
}

// SetDeadline records d for the slot. Call it between Claim and Publish.
func (s *Slot[T]) SetDeadline(d int64) { s.deadline = d }

// Deadline returns the value recorded by SetDeadline, for a goroutine that
// read the position published and knows it cannot be released meanwhile
// (in inflight, the pump, which holds it in Writing). Any other reader uses
// Ring.DeadlineAt: once the position is released, a claim of the slot for
// a later position writes the field.
func (s *Slot[T]) Deadline() int64 { return s.deadline }

// Size returns the bytes reserved for the slot by Claim.
func (s *Slot[T]) Size() int64 { return s.size }
