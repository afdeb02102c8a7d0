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
// take reserves optimistically (a load, then one atomic add) and gives
// back what went over a limit; as the ring does, one claim is admitted
// when nothing else is reserved, so that a message larger than a limit
// cannot wait forever.
//
// The count and the bytes share one word (count above usedShift) when the
// limits leave room, which they do by default: a claim then costs one
// locked instruction here, not two. The room left is for what claimers
// add before they see they went over and take it back: claims of bytes
// the process holds in memory, so far below the 16 TiB the bytes have,
// and of at most 64 messages each, the 2^18 the count has left taking
// 4096 claimers caught between their add and their undo at once. Larger
// limits use two words (wide).
type budget struct {
	maxCount int64
	maxBytes int64
	wide     bool // the count in used, the bytes in bytes
	_        [40]byte
	used     atomic.Int64 // count<<usedShift | bytes; the count alone if wide
	bytes    atomic.Int64 // if wide
	_        [48]byte
	held     atomic.Int64 // messages reserved by hold
	shared   *MemoryLimit // nil: none
	room     ringbuf.Signal
}

const (
	usedShift = 44
	usedBytes = 1<<usedShift - 1
	// The largest limits the packed word takes.
	packedMaxCount = 1 << 18
	packedMaxBytes = 1 << 40
)

func newBudget(maxCount int, maxBytes int64, shared *MemoryLimit) *budget {
	return &budget{maxCount: int64(maxCount), maxBytes: maxBytes, shared: shared,
		wide: maxCount > packedMaxCount || maxBytes > packedMaxBytes}
}

// pending returns the messages and bytes reserved now.
func (b *budget) pending() (int, int64) {
	u := b.used.Load()
	if b.wide {
		return int(u), b.bytes.Load()
	}
	return int(u >> usedShift), u & usedBytes
}

// over reports whether c messages and by bytes, after adding n messages of
// bytes bytes, are over a limit: over unless the add was all there is.
func (b *budget) over(c, by int64, n int, bytes int64) bool {
	return (c > b.maxCount && c != int64(n)) || (by > b.maxBytes && by != bytes)
}

// take reserves n messages of bytes bytes, or reports false and reserves
// nothing.
func (b *budget) take(n int, bytes int64) bool {
	// Clearly full: refused without touching the counters, so that a
	// refusal wakes no waiter (the claimer itself among them).
	if c, by := b.pending(); (c > 0 && c+n > int(b.maxCount)) || (by > 0 && by+bytes > b.maxBytes) {
		return false
	}
	var c, by int64
	if b.wide {
		c, by = b.used.Add(int64(n)), b.bytes.Add(bytes)
	} else {
		u := b.used.Add(int64(n)<<usedShift + bytes)
		c, by = u>>usedShift, u&usedBytes
	}
	if b.over(c, by, n, bytes) {
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
	if b.wide {
		b.used.Add(-int64(n))
		b.bytes.Add(-bytes)
	} else {
		b.used.Add(-(int64(n)<<usedShift + bytes))
	}
	b.room.Broadcast()
}

// force reserves n messages of bytes bytes whatever the limits (see
// ledger.tryClaimExempt).
func (b *budget) force(n int, bytes int64) {
	if b.wide {
		b.used.Add(int64(n))
		b.bytes.Add(bytes)
	} else {
		b.used.Add(int64(n)<<usedShift + bytes)
	}
}

// hold reserves an exempt topic's whole share (see ledger.exemptFrom):
// counted in held too, so that what messages hold is used minus held.
func (b *budget) hold(n int, bytes int64) {
	b.held.Add(int64(n))
	b.force(n, bytes)
}

// unhold gives back n messages and bytes of a share hold reserved (see
// ledger.meter, which gives one back in two parts).
func (b *budget) unhold(n int, bytes int64) {
	b.held.Add(-int64(n))
	b.give(n, bytes)
}

// busy reports whether messages of metered topics hold any of the budget
// (see coarseClock.busy): it is a snapshot.
func (b *budget) busy() bool {
	c, _ := b.pending()
	return int64(c) != b.held.Load()
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
