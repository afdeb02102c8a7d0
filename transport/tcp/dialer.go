package tcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
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
	park   *parker // nil where the loop cannot park (see doc.go)

	writers sync.WaitGroup // the connections' writer goroutines (see writer)

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
	events := &clientEvents{park: newParker()}
	client, err := gnet.NewClient(events,
		gnet.WithLogger(quietLogger{}),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithTicker(true),
		gnet.WithMulticore(false),
	)
	if err != nil {
		events.park.close()
		return nil, fmt.Errorf("inflight/tcp: gnet client: %w", err)
	}
	if err := client.Start(); err != nil {
		events.park.close()
		return nil, fmt.Errorf("inflight/tcp: gnet client start: %w", err)
	}
	return &Dialer{addrs: list, cfg: cfg, client: client, events: events, park: events.park}, nil
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
	d.park.hold() // the loop registers the connection
	defer d.park.release(d.events.any)
	gc, err := d.client.EnrollContext(nc, c) // closes nc; gnet keeps a dup
	if err != nil {
		return nil, fmt.Errorf("inflight/tcp: enroll: %w", err)
	}
	c.mu.Lock()
	c.gc, c.fd = gc, gc.Fd()
	opened := c.opened
	c.mu.Unlock()
	if !opened { // the loop failed to register it, and closed gnet's dup
		return nil, errors.New("inflight/tcp: enroll: the event loop did not take the connection")
	}
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
	d.park.hold()          // for good: the loop runs the shutdown
	err := d.client.Stop() // closes every connection, which stops its writer
	d.park.close()
	d.events.shutAll() // any connection gnet did not close
	d.writers.Wait()
	return err
}
