package broker

import (
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/inflightmq/inflight/wire"
)

// The memory a BATCH frame costs the broker from its check to the end of
// its Append, beside the frame's bytes in the transport's read buffer:
//
//	records block, decompressed (RawLen)   the pool buffer it is copied or decoded into
//	+ its index: a Record per record       built by the appender for Store.Append,
//	  and a wire.Header per header         at most maxAppendIndex at a time (chunks);
//	                                       none for a FrameAppender (then an overcharge)
//	+ queuedFrame                          its place in the session's queue
//
// All sessions together hold at most MaxBufferedBytes of it (the budget):
// a frame is charged before it is decompressed, with an upper bound of its
// headers (a header takes at least 2 bytes of the block), then the bound is
// refunded down to what its check counted; the charge is released once
// its Append returned (or it was dropped). So a bomb (a small compressed
// frame that decodes to the frame limit, of records that expand into a
// large index) costs its share of one budget, not memory of its own.
const (
	recordIndex = int64(unsafe.Sizeof(Record{}))
	headerIndex = int64(unsafe.Sizeof(wire.Header{}))
	frameIndex  = int64(unsafe.Sizeof(queuedFrame{}))

	// maxAppendIndex bounds the Records and Headers one Append is handed:
	// an appender stores a longer run of records with several Appends. It
	// holds 4 frames of the producer's default 4096 records in one Append.
	maxAppendIndex = 4 << 20

	// DefaultMaxBufferedBytes is the default of MaxBufferedBytes.
	DefaultMaxBufferedBytes = 256 << 20
)

// budgetWait bounds how long a frame waits for the budget before its
// session fails with ErrBusy. A producer whose PINGs go unanswered that
// long (its connection is not read meanwhile) has reconnected anyway: by
// default it gives up after two heartbeats of 2s. Tests shorten it.
var budgetWait = 5 * time.Second

// frameCharge is what a frame of batch b is charged: the pool buffer its
// records block takes, its index and its place in the queue. headers is the
// number of headers, or -1 for the most the block can hold.
func frameCharge(b *wire.Batch, headers int) int64 {
	if headers < 0 {
		headers = int(b.RawLen / 2)
	}
	index := min(int64(b.Count)*recordIndex+int64(headers)*headerIndex, maxAppendIndex)
	return int64(bufSize(int(b.RawLen))) + index + frameIndex
}

// reserve charges the budget for a frame of batch b, before its records
// block is copied or decoded, with the most its headers can cost. It
// refuses a block over the frame limit first (ErrProtocol wrapping
// wire.ErrFrameTooLarge or wire.ErrMalformed), and returns ErrBusy if the
// budget did not free up within budgetWait.
func (br *Broker) reserve(b *wire.Batch) (int64, error) {
	switch {
	case int(b.RawLen) > br.dec.Limit():
		return 0, fmt.Errorf("%w: %w: records block of %d bytes, limit %d", ErrProtocol, wire.ErrFrameTooLarge, b.RawLen, br.dec.Limit())
	case b.Codec == wire.CodecNone && int(b.RawLen) != len(b.Data):
		return 0, fmt.Errorf("%w: %w: raw length %d, records block is %d bytes", ErrProtocol, wire.ErrMalformed, b.RawLen, len(b.Data))
	}
	n := frameCharge(b, -1)
	if err := br.budget.acquire(n, budgetWait); err != nil {
		return 0, err
	}
	return n, nil
}

// refund lowers the charge of a checked frame of batch b, with headers
// headers, from charged to what it costs, and returns that.
func (br *Broker) refund(charged int64, b *wire.Batch, headers int) int64 {
	n := frameCharge(b, headers)
	br.budget.release(charged - n)
	return n
}

// drop returns a frame's buffer to the pool and its charge to the budget.
func (br *Broker) drop(buf *[]byte, charge int64) {
	br.bufs.put(buf)
	br.budget.release(charge)
}

// budget is the broker-wide allowance of frame memory (see above). acquire
// waits in order of arrival, so a large frame is not starved by small ones.
// Safe for concurrent use.
type budget struct {
	limit int64

	mu     sync.Mutex
	used   int64
	queue  []*budgetWaiter // waiting, oldest first
	waits  uint64          // acquisitions that had to wait
	failed uint64          // acquisitions that gave up after budgetWait
}

type budgetWaiter struct {
	n       int64
	granted bool          // under mu
	ready   chan struct{} // capacity 1: granted
}

// acquire takes n bytes of the budget, waiting up to wait for them. It
// returns ErrBusy if they did not come in time.
func (b *budget) acquire(n int64, wait time.Duration) error {
	b.mu.Lock()
	if len(b.queue) == 0 && b.used+n <= b.limit {
		b.used += n
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{}, 1)}
	b.queue = append(b.queue, w)
	b.waits++
	b.mu.Unlock()

	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-w.ready:
		return nil
	case <-t.C:
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.granted { // granted as the timer fired
		return nil
	}
	for i, q := range b.queue {
		if q == w {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			break
		}
	}
	b.failed++
	b.grantLocked() // w may have held up smaller ones behind it
	return fmt.Errorf("%w: %d bytes of frame memory not free within %v (MaxBufferedBytes %d, %d in use)",
		ErrBusy, n, wait, b.limit, b.used)
}

// release gives n bytes back and grants waiters they now satisfy.
func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.grantLocked()
	b.mu.Unlock()
}

func (b *budget) grantLocked() {
	for len(b.queue) > 0 && b.used+b.queue[0].n <= b.limit {
		w := b.queue[0]
		b.queue[0] = nil
		b.queue = b.queue[1:]
		b.used += w.n
		w.granted = true
		w.ready <- struct{}{}
	}
	if len(b.queue) == 0 {
		b.queue = nil // let the array go
	}
}

// stats returns the bytes in use, and the waits and failures so far.
func (b *budget) stats() (used int64, waits, failed uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.waits, b.failed
}
