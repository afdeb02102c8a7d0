package stdnet

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"

	"github.com/inflightmq/inflight/transport"
)

// Dialer is a transport.Dialer over TCP, or TLS with ClientTLS. Each
// connection has its own reader and writer goroutines; the Dialer owns them
// and Close stops them. Safe for concurrent use.
type Dialer struct {
	addr string
	cfg  dialConfig

	mu     sync.Mutex
	closed bool
	conns  map[*clientConn]struct{}
	wg     sync.WaitGroup // every connection's goroutines
}

// NewDialer returns a Dialer for the broker at addr (host:port). It starts
// nothing until Dial; Close it when done.
func NewDialer(addr string, opts ...DialOption) (*Dialer, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%w: address %q: %w", ErrInvalidOption, addr, err)
	}
	cfg := defaultDialConfig()
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil DialOption", ErrInvalidOption)
		}
		if err := o.applyDial(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.tls != nil && cfg.tls.ServerName == "" {
		cfg.tls.ServerName = host
	}
	return &Dialer{addr: addr, cfg: cfg, conns: make(map[*clientConn]struct{})}, nil
}

// Dial implements transport.Dialer: it connects (ConnectTimeout, KeepAlive,
// ctx), completes the TLS handshake if configured (bounded the same way),
// and starts the connection's reader and writer. A failed handshake returns
// ErrHandshake wrapping the crypto/tls error that says why (an expired
// certificate, an unknown authority, a name mismatch). After Close it
// returns ErrDialerClosed.
func (d *Dialer) Dial(ctx context.Context, h transport.Handler) (transport.Conn, error) {
	if d.isClosed() {
		return nil, ErrDialerClosed
	}
	nd := net.Dialer{Timeout: d.cfg.connectTimeout, KeepAlive: d.cfg.keepAlive}
	raw, err := nd.DialContext(ctx, "tcp", d.addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := raw.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	rw := raw
	if d.cfg.tls != nil {
		ctx, cancel := context.WithTimeout(ctx, d.cfg.connectTimeout)
		defer cancel()
		tc := tls.Client(raw, d.cfg.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, fmt.Errorf("%w: %s: %w", ErrHandshake, d.addr, err)
		}
		rw = tc
	}
	c := newClientConn(d, raw, rw, h)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		raw.Close()
		return nil, ErrDialerClosed
	}
	d.conns[c] = struct{}{}
	d.wg.Go(c.write)
	d.wg.Go(c.read)
	return c, nil
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
