package stdnet

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/wire/frames"
)

// clientConn is one producer connection: a writer goroutine drains the
// queue WriteFrame fills, a reader goroutine delivers inbound frames. The
// Dialer owns both.
//
// Buffers: WriteFrame queues the caller's buffer, not a copy. The writer
// takes everything queued, writes it, and releases each buffer once the
// write returned: its bytes are in the kernel's socket buffer (or, with TLS,
// sealed into records that are). A peer that stops reading blocks the
// writer, the buffers stay held, and the producer's pump, whose pool of
// buffers is its window, stops. WriteQueue bounds the queue for callers
// without such a window.
type clientConn struct {
	d    *Dialer
	raw  net.Conn // the socket: closing it stops both goroutines
	rw   net.Conn // raw, or the tls.Conn over it
	addr string   // the address it connected to
	h    transport.Handler

	mu     sync.Mutex
	queue  []*transport.Buffer // handed to WriteFrame(s), not yet taken by the writer
	calls  int                 // the WriteFrame(s) calls that queued them (see WriteQueue)
	spare  []*transport.Buffer // the writer's last batch, emptied, for reuse
	closed bool
	reason error         // why it closed; nil for a local Close
	wake   chan struct{} // one pending signal: the queue is not empty
	done   chan struct{} // closed by shut
}

func newClientConn(d *Dialer, raw, rw net.Conn, addr string, h transport.Handler) *clientConn {
	return &clientConn{d: d, raw: raw, rw: rw, addr: addr, h: h, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// WriteFrame implements transport.Conn: it queues buf for the writer and
// returns at once. Safe for concurrent use.
func (c *clientConn) WriteFrame(buf *transport.Buffer) error { return c.enqueue(buf, nil) }

// WriteFrames implements transport.FramesWriter: it queues bufs for the
// writer, which writes them with what else is queued through its buffer
// (64 KiB: larger runs go out in several writes), and returns at once.
// Safe for concurrent use.
func (c *clientConn) WriteFrames(bufs []*transport.Buffer) error { return c.enqueue(nil, bufs) }

// enqueue queues buf, or bufs, as one call counted against WriteQueue, and
// wakes the writer.
func (c *clientConn) enqueue(buf *transport.Buffer, bufs []*transport.Buffer) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return transport.ErrClosed
	}
	if c.calls >= c.d.cfg.writeQueue {
		c.mu.Unlock()
		c.shut(ErrWriteBacklog)
		return fmt.Errorf("%w: %w", transport.ErrClosed, ErrWriteBacklog)
	}
	if buf != nil {
		c.queue = append(c.queue, buf)
	} else {
		c.queue = append(c.queue, bufs...)
	}
	c.calls++
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return nil
}

// Close implements transport.Conn. Idempotent, safe from any goroutine; the
// Handler's OnClose runs once, with a nil error, on the reader goroutine.
func (c *clientConn) Close() error {
	c.shut(nil)
	return nil
}

// shut closes the connection for reason, once: the first reason wins.
// Queued buffers are abandoned, as transport.Conn allows.
func (c *clientConn) shut(reason error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed, c.reason = true, reason
	c.queue = nil
	close(c.done)
	c.mu.Unlock()
	_ = c.raw.Close()
}

func (c *clientConn) why() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

// write is the writer goroutine: it writes whatever is queued, in order,
// through a buffer that coalesces small frames (a large frame goes to the
// socket directly), and releases the frames once written.
func (c *clientConn) write() {
	w := bufio.NewWriterSize(c.rw, 64<<10)
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		c.mu.Lock()
		batch := c.queue
		c.queue, c.calls = c.spare, 0
		c.spare = nil
		c.mu.Unlock()
		for _, b := range batch {
			if _, err := w.Write(b.Bytes); err != nil {
				c.shut(err)
				return
			}
		}
		if err := w.Flush(); err != nil {
			c.shut(err)
			return
		}
		for i, b := range batch {
			b.Release()
			batch[i] = nil
		}
		c.mu.Lock()
		if !c.closed {
			c.spare = batch[:0]
		}
		c.mu.Unlock()
	}
}

// read is the reader goroutine: it hands every inbound frame to the
// Handler until the connection closes (frames still buffered then are not
// delivered), then reports the close, after the last OnFrame.
func (c *clientConn) read() {
	fr := frames.NewReader(c.rw, 16<<10, c.d.cfg.MaxFrame, frames.NoWait{})
	for c.open() {
		frame, err := fr.Next()
		if err != nil {
			c.shut(c.explain(err))
			break
		}
		c.h.OnFrame(frame)
	}
	c.d.remove(c)
	c.h.OnClose(c.why())
}

func (c *clientConn) open() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// explain makes a read error say what happened. With TLS 1.3 a client
// finishes its half of the handshake before the server has checked the
// client's certificate: a refusal (no certificate, an unknown authority)
// arrives as the server's alert on the first read, and is reported as
// the handshake failure it is.
func (c *clientConn) explain(err error) error {
	var op *net.OpError
	switch {
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: the broker hung up", transport.ErrClosed)
	case c.rw != c.raw && errors.As(err, &op) && op.Op == "remote error":
		return fmt.Errorf("%w: %s refused the handshake: %w", ErrHandshake, c.addr, err)
	}
	return err
}
