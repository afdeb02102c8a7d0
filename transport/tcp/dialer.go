package tcp

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/transport/endpoints"
)

// DialOption configures a Dialer.
type DialOption interface{ applyDial(*dialConfig) error }

type dialOptionFunc func(*dialConfig) error

func (f dialOptionFunc) applyDial(c *dialConfig) error { return f(c) }

type dialConfig struct{ endpoints.Settings }

// ConnectTimeout bounds one TCP connect attempt (default 5s); the context
// given to Dial can only shorten it, and shares itself among the addresses
// still to try (see NewDialer).
func ConnectTimeout(d time.Duration) DialOption {
	return dialOptionFunc(func(c *dialConfig) error { return c.SetConnectTimeout(d) })
}

// KeepAlive sets the TCP keep-alive period (default 15s; negative turns it
// off). The producer's heartbeat detects dead peers much sooner; keep-alive
// only helps the kernel clean up.
func KeepAlive(d time.Duration) DialOption {
	return dialOptionFunc(func(c *dialConfig) error { c.KeepAlive = d; return nil })
}

// MaxInboundFrame sets the largest frame the Dialer accepts from the broker
// (default wire.DefaultMaxFrameSize). A broker only sends small frames.
func MaxInboundFrame(n int) DialOption {
	return dialOptionFunc(func(c *dialConfig) error { return c.SetMaxFrame(n) })
}

// Dialer is a transport.Dialer over TCP. All its connections share one gnet
// client and its event loop. Safe for concurrent use.
type Dialer struct {
	addrs  *endpoints.List
	cfg    dialConfig
	client *gnet.Client
	events *clientEvents

	mu     sync.Mutex
	closed bool
}

// NewDialer returns a Dialer for the broker at addrs, "host:port" or a
// comma-separated list of them (gateways of one store), and starts its
// event loop. Close it when done.
//
// With several addresses, or a host name that resolves to several, each
// Dial starts one address further along than the previous one (the first
// at a random one) and tries the others in turn if it does not connect:
// the dialer's producers spread over the gateways, and a producer that
// lost its connection reconnects to the next one. Each connect attempt is
// bounded by ConnectTimeout, and shares what is left of the Dial's context
// with the addresses still to try. Names are resolved at every Dial.
func NewDialer(addrs string, opts ...DialOption) (*Dialer, error) {
	cfg := dialConfig{endpoints.DefaultSettings()}
	list, err := endpoints.Configure(addrs, &cfg, opts, DialOption.applyDial, ErrInvalidOption)
	if err != nil {
		return nil, err
	}
	events := &clientEvents{}
	client, err := gnet.NewClient(events,
		gnet.WithLogger(quietLogger{}),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithTicker(true),
		gnet.WithMulticore(false),
	)
	if err != nil {
		return nil, fmt.Errorf("inflight/tcp: gnet client: %w", err)
	}
	if err := client.Start(); err != nil {
		return nil, fmt.Errorf("inflight/tcp: gnet client start: %w", err)
	}
	return &Dialer{addrs: list, cfg: cfg, client: client, events: events}, nil
}

// Dial implements transport.Dialer: it connects to the next address that
// accepts (see NewDialer) with a net.Dialer (connect timeout, keep-alive,
// ctx) and hands the socket to the gnet event loop. If none connects, the
// error names every address tried and why.
func (d *Dialer) Dial(ctx context.Context, h transport.Handler) (transport.Conn, error) {
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, ErrDialerClosed
	}
	nc, err := endpoints.Dial(ctx, d.addrs, d.cfg.ConnectTimeout, func(ctx context.Context, t endpoints.Target) (net.Conn, error) {
		return d.cfg.DialTCP(ctx, t.Addr)
	})
	if err != nil {
		return nil, err
	}
	c := &clientConn{d: d, h: h}
	d.mu.Lock() // Close must not stop the client between this check and Enroll
	defer d.mu.Unlock()
	if d.closed {
		nc.Close()
		return nil, ErrDialerClosed
	}
	gc, err := d.client.EnrollContext(nc, c) // closes nc; gnet keeps a dup
	if err != nil {
		return nil, fmt.Errorf("inflight/tcp: enroll: %w", err)
	}
	c.gc = gc
	d.events.add(c)
	return c, nil
}

// Close closes every connection and stops the event loop. Idempotent.
func (d *Dialer) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	return d.client.Stop()
}

// clientConn is one producer connection. WriteFrame and Close may be called
// from any goroutine; the fields marked "loop" belong to the event loop.
type clientConn struct {
	d      *Dialer
	h      transport.Handler
	gc     gnet.Conn
	closed atomic.Bool
	once   sync.Once // OnClose reaches h once

	held    []heldBuffer // loop: written to gnet, maybe not yet to the socket
	handed  uint64       // loop: bytes handed to gnet so far
	holding atomic.Bool  // len(held) > 0, for the ticker
}

type heldBuffer struct {
	buf *transport.Buffer
	end uint64 // handed count once this buffer's bytes were handed
}

// WriteFrame implements transport.Conn. The frame is written straight from
// buf (gnet copies only what the socket does not take at once), and buf is
// released once all its bytes have reached the socket.
func (c *clientConn) WriteFrame(buf *transport.Buffer) error {
	if c.closed.Load() {
		return transport.ErrClosed
	}
	n := uint64(len(buf.Bytes))
	err := c.gc.AsyncWrite(buf.Bytes, func(gc gnet.Conn, err error) error {
		if err != nil {
			return nil // closed: the buffer is abandoned
		}
		c.handed += n
		c.held = append(c.held, heldBuffer{buf, c.handed})
		c.releaseWritten(gc)
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: %w", transport.ErrClosed, err)
	}
	return nil
}

// releaseWritten releases the held buffers whose bytes have all left gnet's
// outbound buffer. Loop only.
func (c *clientConn) releaseWritten(gc gnet.Conn) {
	written := c.handed - uint64(gc.OutboundBuffered())
	i := 0
	for ; i < len(c.held) && c.held[i].end <= written; i++ {
		c.held[i].buf.Release()
		c.held[i] = heldBuffer{}
	}
	if i > 0 {
		c.held = append(c.held[:0], c.held[i:]...)
	}
	c.holding.Store(len(c.held) > 0)
}

// Close implements transport.Conn.
func (c *clientConn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	return c.gc.Close()
}

func (c *clientConn) notifyClose(err error) {
	c.closed.Store(true)
	c.once.Do(func() { c.h.OnClose(err) })
}

// clientEvents is the gnet event handler shared by a Dialer's connections.
type clientEvents struct {
	gnet.BuiltinEventEngine
	mu    sync.Mutex
	conns map[*clientConn]struct{} // for the ticker
}

func (e *clientEvents) add(c *clientConn) {
	e.mu.Lock()
	if e.conns == nil {
		e.conns = make(map[*clientConn]struct{})
	}
	e.conns[c] = struct{}{}
	e.mu.Unlock()
}

func (e *clientEvents) OnTraffic(gc gnet.Conn) gnet.Action {
	c, ok := gc.Context().(*clientConn)
	if !ok {
		return gnet.Close
	}
	c.releaseWritten(gc)
	if _, err := readFrames(gc, c.d.cfg.MaxFrame, func(frame []byte) error {
		c.h.OnFrame(frame)
		return nil
	}); err != nil {
		c.notifyClose(err)
		return gnet.Close
	}
	return gnet.None
}

func (e *clientEvents) OnClose(gc gnet.Conn, err error) gnet.Action {
	c, ok := gc.Context().(*clientConn)
	if !ok {
		return gnet.None
	}
	e.mu.Lock()
	delete(e.conns, c)
	e.mu.Unlock()
	c.held = nil
	if err == nil && !c.closed.Load() {
		err = transport.ErrClosed // the broker hung up
	}
	c.notifyClose(err)
	return gnet.None
}

// OnTick wakes connections that hold written buffers, so that buffers whose
// bytes reached the socket are released even when no inbound traffic or
// further write comes to run the check.
func (e *clientEvents) OnTick() (time.Duration, gnet.Action) {
	e.mu.Lock()
	for c := range e.conns {
		if c.holding.Load() {
			_ = c.gc.Wake(func(gc gnet.Conn, _ error) error {
				c.releaseWritten(gc)
				return nil
			})
		}
	}
	e.mu.Unlock()
	return 10 * time.Millisecond, gnet.None
}
