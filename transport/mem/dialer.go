package mem

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inflightmq/inflight/transport"
)

// Dialer connects to a broker in the same process. Its methods are safe for
// concurrent use; the fault switches take effect for frames processed after
// the call.
type Dialer struct {
	mu     sync.Mutex
	broker transport.Acceptor
	conns  map[*conn]struct{}
	closed bool
	wg     sync.WaitGroup // the goroutines of every connection

	refuse       atomic.Bool
	dropAfter    atomic.Int64 // frames per connection before it is cut; 0: never
	dropReceipts atomic.Bool
	dupReceipts  atomic.Bool
	receiptDelay atomic.Int64 // ns
	corrupt      atomic.Int64 // frames still to corrupt
	stall        Gate
	dials        atomic.Int64
}

// NewDialer returns a Dialer whose connections are served by b, a
// *broker.Broker or any other transport.Acceptor: each connection is a
// session b accepts.
func NewDialer(b transport.Acceptor) *Dialer {
	return &Dialer{broker: b, conns: make(map[*conn]struct{})}
}

// Dial implements transport.Dialer. It fails with ErrRefused while
// RefuseDials is on, ErrDialerClosed after Close, and ctx's error if ctx is
// done.
func (d *Dialer) Dial(ctx context.Context, h transport.Handler) (transport.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, ErrDialerClosed
	}
	if d.refuse.Load() {
		d.mu.Unlock()
		return nil, ErrRefused
	}
	c := newConn(d, d.broker, h)
	d.conns[c] = struct{}{}
	d.dials.Add(1)
	d.wg.Add(2)
	d.mu.Unlock()
	// Start the goroutines after unlocking, as the last thing before
	// returning, so that h rarely hears of a cut before Dial returns (the
	// transport contract allows it; see transport.Dialer).
	go c.serve()
	go c.deliver()
	return c, nil
}

// SetBroker makes later dials reach b (existing connections keep their
// broker). With RefuseDials and DropConnections it models a broker restart;
// give the new broker the old one's Store to keep its data.
func (d *Dialer) SetBroker(b transport.Acceptor) {
	d.mu.Lock()
	d.broker = b
	d.mu.Unlock()
}

// RefuseDials makes Dial fail with ErrRefused while on is true.
func (d *Dialer) RefuseDials(on bool) { d.refuse.Store(on) }

// DropConnections cuts every open connection now; their handlers see
// OnClose(ErrDropped). Frames queued and not yet read by the broker are lost.
func (d *Dialer) DropConnections() {
	for _, c := range d.snapshot() {
		c.close(ErrDropped)
	}
}

// DropAfterFrames makes every connection, open or future, close with
// ErrDropped once its broker side has processed n frames in total (HELLO
// included), and sent their replies; the frames after the nth are never
// processed. n <= 0 turns it off.
func (d *Dialer) DropAfterFrames(n int) { d.dropAfter.Store(int64(max(n, 0))) }

// DropReceipts makes the broker's RECEIPT frames vanish instead of reaching
// the producer, while on is true. The records are still stored.
func (d *Dialer) DropReceipts(on bool) { d.dropReceipts.Store(on) }

// DuplicateReceipts makes the broker's RECEIPT frames arrive twice while on
// is true (a receipt is cumulative, so a producer must treat the second as
// old news).
func (d *Dialer) DuplicateReceipts(on bool) { d.dupReceipts.Store(on) }

// DelayReceipts holds each frame from the broker (receipts and the rest) for
// delay before the producer sees it; order is kept. 0 turns it off.
func (d *Dialer) DelayReceipts(delay time.Duration) { d.receiptDelay.Store(int64(max(delay, 0))) }

// StallWrites makes the broker stop reading frames while on is true: frames
// queue up (WriteFrame blocks once the queue is full) until it is turned off
// or the connection closes.
func (d *Dialer) StallWrites(on bool) { d.stall.Stall(on) }

// CorruptFrames flips one byte in each of the next n frames the broker reads
// (in a BATCH, a record byte, so the CRC check catches it; in other frames,
// the type byte). The broker answers ERROR and closes the connection. The
// caller's bytes are not modified.
func (d *Dialer) CorruptFrames(n int) { d.corrupt.Store(int64(max(n, 0))) }

// Dials returns the number of successful dials so far.
func (d *Dialer) Dials() int { return int(d.dials.Load()) }

// Conns returns the number of open connections.
func (d *Dialer) Conns() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.conns)
}

// Close cuts every connection (OnClose(ErrDialerClosed)), makes later dials
// fail, and waits until every connection goroutine has returned. Idempotent.
func (d *Dialer) Close() error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	for _, c := range d.snapshot() {
		c.close(ErrDialerClosed)
	}
	d.wg.Wait()
	return nil
}

func (d *Dialer) snapshot() []*conn {
	d.mu.Lock()
	defer d.mu.Unlock()
	cs := make([]*conn, 0, len(d.conns))
	for c := range d.conns {
		cs = append(cs, c)
	}
	return cs
}

func (d *Dialer) forget(c *conn) {
	d.mu.Lock()
	delete(d.conns, c)
	d.mu.Unlock()
}
