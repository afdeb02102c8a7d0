package mem

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/smallnest/chanx"

	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/wire"
)

// inboundQueue is how many frames a producer can have queued toward the
// broker before WriteFrame waits. The producer bounds its own frames in
// flight; this only matters while the broker side is stalled.
const inboundQueue = 256

// conn is one in-process connection.
//
//	producer --WriteFrame--> in --serve()--> Session.Handle
//	producer <--OnFrame-- deliver() <--out (unbounded)-- Session's Peer.Send
//
// serve owns the session. Sends on out come from serve's goroutine, from
// the session's own (receipts) and from another session's reader that takes
// this one's producer name over; sendMu orders them with serve closing
// out.In when it stops. deliver drains out and then calls OnClose.
type conn struct {
	d       *Dialer
	h       transport.Handler
	session transport.Session
	in      chan *transport.Buffer
	out     *chanx.UnboundedChan[outFrame]

	sendMu    sync.Mutex
	outClosed bool // out.In is closed; guarded by sendMu

	once sync.Once
	done chan struct{} // closed by close
	err  error         // why it closed; written before done is closed
}

type outFrame struct {
	b  []byte
	at time.Time // deliver no earlier than this
}

func newConn(d *Dialer, b transport.Acceptor, h transport.Handler) *conn {
	c := &conn{
		d:    d,
		h:    h,
		in:   make(chan *transport.Buffer, inboundQueue),
		out:  chanx.NewUnboundedChan[outFrame](context.Background(), 16),
		done: make(chan struct{}),
	}
	c.session = b.Accept(peer{c})
	return c
}

// WriteFrame implements transport.Conn.
func (c *conn) WriteFrame(buf *transport.Buffer) error {
	select {
	case <-c.done:
		return transport.ErrClosed
	default:
	}
	select {
	case c.in <- buf:
		return nil
	case <-c.done:
		return transport.ErrClosed
	}
}

// Close implements transport.Conn.
func (c *conn) Close() error {
	c.close(nil)
	return nil
}

func (c *conn) close(err error) {
	c.once.Do(func() {
		c.err = err
		close(c.done)
		c.d.forget(c)
	})
}

// serve is the broker side: it feeds inbound frames to the session, applying
// the dialer's faults, until the connection closes.
func (c *conn) serve() {
	defer c.d.wg.Done()
	defer c.closeOut()
	defer c.session.Close()
	frames := int64(0)
	for {
		var buf *transport.Buffer
		select {
		case <-c.done:
			return
		case buf = <-c.in:
		}
		select {
		case <-c.done: // closed while this frame was queued: it is lost
			return
		default:
		}
		if !c.d.stall.Wait(c.done) {
			return
		}
		if n := c.d.dropAfter.Load(); n > 0 && frames >= n {
			c.close(ErrDropped)
			return
		}
		frames++
		var err error
		if c.d.corrupt.Load() > 0 && c.d.corrupt.Add(-1) >= 0 {
			err = c.session.Handle(corrupt(buf.Bytes))
			buf.Release()
		} else if k, ok := c.session.(transport.Keeper); ok {
			// The producer's buffer goes to the broker, which releases it
			// once it stored the frame: no copy (the producer's window
			// bounds what the broker holds this way).
			err = k.HandleKeep(buf.Bytes, buf.Release)
		} else {
			err = c.session.Handle(buf.Bytes)
			buf.Release()
		}
		if err != nil {
			c.close(err)
			return
		}
		if n := c.d.dropAfter.Load(); n > 0 && frames >= n {
			// What the session was handed is stored and acknowledged
			// first (Close waits for it), so the cut falls after the
			// nth frame's reply, whenever its store answers.
			c.session.Close()
			c.close(ErrDropped)
			return
		}
	}
}

// closeOut closes out.In once no Send can be using it.
func (c *conn) closeOut() {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	c.outClosed = true
	close(c.out.In)
}

// corrupt returns a copy of frame with a byte flipped that the broker must
// notice: in a BATCH the last byte, record data covered by the CRC; in any
// other frame (whose body has no checksum) the type byte, which becomes an
// unknown type. The caller's frame is left intact, as by a fault on the
// wire: it may send the same bytes again.
func corrupt(frame []byte) []byte {
	frame = bytes.Clone(frame)
	switch {
	case len(frame) > wire.HeaderSize && wire.Type(frame[wire.HeaderSize-1]) == wire.TypeBatch:
		frame[len(frame)-1] ^= 0x5a
	case len(frame) >= wire.HeaderSize:
		frame[wire.HeaderSize-1] ^= 0x80
	}
	return frame
}

// deliver is the producer side: it hands the broker's frames to the Handler
// in order, then reports the close. The broker sends nothing before the
// producer's first frame, and Dial starts deliver as its very last step, so
// a Handler call before Dial returns would take a cut racing with Dial and
// the scheduler running deliver in the instant before Dial's return.
func (c *conn) deliver() {
	defer c.d.wg.Done()
	var timer *time.Timer
	for f := range c.out.Out {
		if wait := time.Until(f.at); wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			select {
			case <-timer.C:
			case <-c.done: // closing: stop delaying, deliver what was sent
			}
		}
		c.h.OnFrame(f.b)
	}
	if timer != nil {
		timer.Stop()
	}
	<-c.done
	c.h.OnClose(c.err)
}

// peer is the broker session's view of the connection.
type peer struct{ c *conn }

// Send copies frame toward the producer, or drops it if it is a RECEIPT and
// DropReceipts is on. Safe from any goroutine: once serve has stopped it
// returns ErrClosed (out.In never blocks for long: it is unbounded).
func (p peer) Send(frame []byte) error {
	c := p.c
	select {
	case <-c.done:
		return transport.ErrClosed
	default:
	}
	drop, dup := c.d.dropReceipts.Load(), c.d.dupReceipts.Load()
	receipt := false
	if drop || dup {
		t, err := wire.TypeOf(frame)
		receipt = err == nil && t == wire.TypeReceipt
	}
	if receipt && drop {
		return nil
	}
	f := outFrame{b: append([]byte(nil), frame...)}
	if delay := c.d.receiptDelay.Load(); delay > 0 {
		f.at = time.Now().Add(time.Duration(delay))
	}
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	if c.outClosed {
		return transport.ErrClosed
	}
	c.out.In <- f
	if receipt && dup {
		c.out.In <- f
	}
	return nil
}

// Close is called by the broker when another session takes over this
// connection's producer name, or after it sent an ERROR frame for a failed
// store. The frames sent before are delivered before OnClose.
func (p peer) Close() error {
	p.c.close(ErrClosedByBroker)
	return nil
}
