package stdnet

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"

	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/transport/endpoints"
)

// Dialer is a transport.Dialer over TCP, or TLS with ClientTLS. Each
// connection has its own reader and writer goroutines; the Dialer owns them
// and Close stops them. Safe for concurrent use.
type Dialer struct {
	addrs *endpoints.List
	cfg   dialConfig

	mu     sync.Mutex
	closed bool
	conns  map[*clientConn]struct{}
	wg     sync.WaitGroup // every connection's goroutines
}

// NewDialer returns a Dialer for the broker at addrs, "host:port" or a
// comma-separated list of them (gateways of one store). It starts nothing
// until Dial; Close it when done.
//
// With several addresses, or a host name that resolves to several, each
// Dial starts one address further along than the previous one (the first
// at a random one) and tries the others in turn if it does not connect or
// its TLS handshake fails: the dialer's producers spread over the
// gateways, and a producer that lost its connection reconnects to the next
// one. Without a ServerName in ClientTLS's config, a server's certificate
// must be valid for the host as it appears in addrs.
func NewDialer(addrs string, opts ...DialOption) (*Dialer, error) {
	cfg := defaultDialConfig()
	list, err := endpoints.Configure(addrs, &cfg, opts, DialOption.applyDial, ErrInvalidOption)
	if err != nil {
		return nil, err
	}
	return &Dialer{addrs: list, cfg: cfg, conns: make(map[*clientConn]struct{})}, nil
}

// Dial implements transport.Dialer: it connects to the next address that
// accepts (see NewDialer; ConnectTimeout, KeepAlive, ctx), completes the
// TLS handshake if configured (bounded the same way), and starts the
// connection's reader and writer. A failed handshake returns ErrHandshake
// wrapping the crypto/tls error that says why (an expired certificate, an
// unknown authority, a name mismatch); with several addresses the error
// names every address tried and why. After Close it returns
// ErrDialerClosed.
func (d *Dialer) Dial(ctx context.Context, h transport.Handler) (transport.Conn, error) {
	if d.isClosed() {
		return nil, ErrDialerClosed
	}
	s, err := endpoints.Dial(ctx, d.addrs, d.cfg.ConnectTimeout, d.connect)
	if err != nil {
		return nil, err
	}
	c := newClientConn(d, s.raw, s.rw, s.addr, h)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		s.raw.Close()
		return nil, ErrDialerClosed
	}
	d.conns[c] = struct{}{}
	d.wg.Go(c.write)
	d.wg.Go(c.read)
	return c, nil
}

// socket is a connected socket, and the TLS connection over it if any.
type socket struct {
	raw, rw net.Conn
	addr    string
}

// connect connects to t and completes the TLS handshake if configured,
// both within ctx.
func (d *Dialer) connect(ctx context.Context, t endpoints.Target) (socket, error) {
	raw, err := d.cfg.DialTCP(ctx, t.Addr)
	if err != nil {
		return socket{}, err
	}
	if tc, ok := raw.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if d.cfg.tls == nil {
		return socket{raw, raw, t.Addr}, nil
	}
	cfg := d.cfg.tls
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		cfg.ServerName = t.Host
	}
	tc := tls.Client(raw, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		raw.Close()
		return socket{}, fmt.Errorf("%w: %w", ErrHandshake, err)
	}
	return socket{raw, tc, t.Addr}, nil
}

func (d *Dialer) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

func (d *Dialer) remove(c *clientConn) {
	d.mu.Lock()
	delete(d.conns, c)
	d.mu.Unlock()
}

// Close closes every connection (their Handlers' OnClose run with a nil
// error) and waits for their goroutines. Idempotent. It must not be called
// from a Handler's method, which runs on a goroutine Close waits for.
func (d *Dialer) Close() error {
	d.mu.Lock()
	d.closed = true
	conns := make([]*clientConn, 0, len(d.conns))
	for c := range d.conns {
		conns = append(conns, c)
	}
	d.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	d.wg.Wait()
	return nil
}
