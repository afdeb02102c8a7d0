package server

import (
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/wire"
)

// Server serves a broker.Broker over TCP, or TLS with TLS: one goroutine
// accepts, one per connection reads frames and hands them to the
// connection's broker session, whose own goroutine stores them and sends
// the receipts (see broker.Session). The Server owns every goroutine it
// starts; Close stops them. Its methods are safe for concurrent use.
type Server struct {
	broker *broker.Broker
	cfg    serverConfig
	ln     net.Listener
	tls    *tls.Config // nil: plain TCP

	cert       reloadable
	reloadable bool // the certificate is cert's (see ReloadCertificate)

	ctx    context.Context // ends at Close: stops handshakes in progress
	cancel context.CancelFunc

	mu      sync.Mutex
	conns   map[*conn]struct{}
	pending list.List // of *conn: the connections without a HELLO yet, oldest first
	closing bool
	wg      sync.WaitGroup // the accept loop and every connection

	refusing atomic.Int64 // TLS refusals in progress (see refuse)
	count    counters

	closeOnce sync.Once
}

// counters are the totals Stats reports.
type counters struct {
	accepted, refused, refusedPending, handshakeTimeouts, timeouts, protocolErrors,
	handshakes, notTLS, maxBuffered atomic.Int64
}

// Stats is a snapshot of a Server's counters. Every connection refused, or
// closed before its HELLO, for a reason of the Server's own is counted in
// exactly one of Refused, RefusedPending, HandshakeTimeouts,
// HandshakeErrors and NotTLS, and reported to OnRefused.
type Stats struct {
	Conns    int   // open connections, pending ones included
	Pending  int   // open connections that have not sent their HELLO yet
	Accepted int64 // connections accepted in total
	// Refused counts connections refused by MaxConns (every open one was
	// past its HELLO).
	Refused int64
	// RefusedPending counts pending connections closed to make room for a
	// newer one (MaxPendingConns or MaxConns reached).
	RefusedPending int64
	// HandshakeTimeouts counts connections closed for not completing their
	// TLS handshake and HELLO within HandshakeTimeout.
	HandshakeTimeouts int64
	Timeouts          int64 // connections closed by ReadTimeout or IdleTimeout
	Errors            int64 // connections closed for a protocol or store error
	// HandshakeErrors counts TLS handshakes that failed for a TLS reason (a
	// missing, expired or unknown certificate, an alert): not timeouts, not
	// plain TCP.
	HandshakeErrors int64
	NotTLS          int64 // connections to a TLS server that did not speak TLS
	MaxBuffered     int64 // most bytes one connection held for reading frames
}

// New listens on addr (host:port; port 0 picks one, see Addr) and serves b
// until Close. It returns once the listener is bound; ErrInvalidOption for
// an option out of range, or the listen error.
func New(addr string, b *broker.Broker, opts ...Option) (*Server, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: nil broker", ErrInvalidOption)
	}
	cfg := defaultServerConfig()
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.clientCAs != nil && cfg.tls == nil {
		return nil, fmt.Errorf("%w: RequireClientCert without TLS", ErrInvalidOption)
	}
	s := &Server{broker: b, cfg: cfg, tls: cfg.tls, conns: make(map[*conn]struct{})}
	if s.tls != nil {
		if cfg.clientCAs != nil {
			s.tls.ClientAuth = tls.RequireAndVerifyClientCert
			s.tls.ClientCAs = cfg.clientCAs
		}
		s.reloadable = s.cert.takeOver(s.tls)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("inflight/server: listen %s: %w", addr, err)
	}
	s.ln = ln
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Go(s.accept)
	return s, nil
}

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	n, pending := len(s.conns), s.pending.Len()
	s.mu.Unlock()
	return Stats{
		Conns:             n,
		Pending:           pending,
		Accepted:          s.count.accepted.Load(),
		Refused:           s.count.refused.Load(),
		RefusedPending:    s.count.refusedPending.Load(),
		HandshakeTimeouts: s.count.handshakeTimeouts.Load(),
		Timeouts:          s.count.timeouts.Load(),
		Errors:            s.count.protocolErrors.Load(),
		HandshakeErrors:   s.count.handshakes.Load(),
		NotTLS:            s.count.notTLS.Load(),
		MaxBuffered:       s.count.maxBuffered.Load(),
	}
}

// accept is the accept loop; it ends when Close closes the listener.
func (s *Server) accept() {
	backoff := time.Duration(0)
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors or similar: wait a little, as
			// net/http does, rather than spin or give up.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
				return
			}
			continue
		}
		backoff = 0
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		c := newConn(s, nc)
		reg, evicted := s.register(c)
		switch reg {
		case registered:
			s.count.accepted.Add(1)
			s.wg.Go(c.serve)
		case full:
			s.reportRefusal(nc.RemoteAddr(), ErrTooManyConns)
			s.refuse(nc)
		default: // closing
			_ = nc.Close()
		}
		if evicted != nil {
			evicted.evict()
		}
	}
}

type registration int

const (
	registered registration = iota
	full
	closing
)

// register adds c to the open connections, as pending. If MaxPendingConns
// or MaxConns is reached, c takes the place of the oldest pending
// connection, returned for the caller to evict; with no pending connection
// to take the place of, c is refused (full).
func (s *Server) register(c *conn) (registration, *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return closing, nil
	}
	var evicted *conn
	if s.pending.Len() >= s.cfg.maxPending || len(s.conns) >= s.cfg.maxConns {
		if s.pending.Len() == 0 {
			return full, nil
		}
		evicted = s.pending.Remove(s.pending.Front()).(*conn)
		evicted.pending = nil
		delete(s.conns, evicted) // its slot is c's from now on
	}
	s.conns[c] = struct{}{}
	c.pending = s.pending.PushBack(c)
	return registered, evicted
}

// helloRead marks c as past its HELLO: no longer pending. It reports false if
// c was evicted meanwhile.
func (s *Server) helloRead(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.pending == nil {
		return false
	}
	s.pending.Remove(c.pending)
	c.pending = nil
	return true
}

func (s *Server) unregister(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if c.pending != nil {
		s.pending.Remove(c.pending)
		c.pending = nil
	}
	s.mu.Unlock()
}

// reportRefusal counts a refusal under its reason and tells OnRefused.
func (s *Server) reportRefusal(addr net.Addr, err error) {
	switch {
	case errors.Is(err, ErrTooManyConns):
		s.count.refused.Add(1)
	case errors.Is(err, ErrTooManyPending):
		s.count.refusedPending.Add(1)
	case errors.Is(err, ErrHandshakeTimeout):
		s.count.handshakeTimeouts.Add(1)
	case errors.Is(err, ErrNotTLS):
		s.count.notTLS.Add(1)
	default:
		s.count.handshakes.Add(1)
	}
	if fn := s.cfg.onRefused; fn != nil {
		fn(Refusal{Addr: addr, Err: err})
	}
}

func (s *Server) snapshot() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		cs = append(cs, c)
	}
	return cs
}

// maxRefusing bounds the refusals in progress: each lingers for the client
// to read its ERROR frame (see linger), and over TLS needs a handshake to
// carry it; a flood of connections must not become a flood of goroutines.
// Beyond it a connection is closed at once: over plain TCP after its ERROR
// frame was written, which the client may miss if it was sending; over TLS
// without a word.
const maxRefusing = 16

// refuse answers a connection beyond MaxConns with an ERROR frame and
// closes it, on a goroutine of its own, bounded by maxRefusing, by
// HandshakeTimeout for a TLS handshake, and by lingerTime after.
func (s *Server) refuse(nc net.Conn) {
	frame := errorFrame(wire.CodeProtocol, ErrTooManyConns)
	if s.refusing.Add(1) > maxRefusing {
		s.refusing.Add(-1)
		if s.tls == nil { // the frame fits the empty socket buffer
			_ = nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			_, _ = nc.Write(frame)
		}
		_ = nc.Close()
		return
	}
	s.wg.Go(func() {
		defer s.refusing.Add(-1)
		defer nc.Close()
		rw := nc
		if s.tls != nil {
			_ = nc.SetDeadline(time.Now().Add(s.cfg.handshake))
			tc := tls.Server(nc, s.tls)
			if err := tc.HandshakeContext(s.ctx); err != nil {
				return
			}
			rw = tc
		}
		_ = nc.SetWriteDeadline(time.Now().Add(s.cfg.writeTimeout))
		_, _ = rw.Write(frame)
		linger(nc, rw)
	})
}

// CloseConns closes every open connection (the producers reconnect) and
// keeps serving.
func (s *Server) CloseConns() {
	for _, c := range s.snapshot() {
		c.cut()
	}
}

// Close shuts the server down in this order: it stops accepting; it stops
// every connection from reading further frames, lets each finish the frame
// in hand and write the replies it owes (receipts for what was stored),
// then closes it; and it waits for all of it, or for ctx to end. If ctx
// ends first it closes the remaining connections at once and returns
// ctx's error without waiting further (their goroutines end as soon as the
// store returns). Sessions end; producers resend to whoever serves next.
// Only the first call does this; later calls return nil at once.
func (s *Server) Close(ctx context.Context) error {
	var err error
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		_ = s.ln.Close()
		s.cancel()
		for _, c := range s.snapshot() {
			c.stop()
		}
		done := make(chan struct{})
		go func() { s.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			err = ctx.Err()
			s.CloseConns()
		}
	})
	return err
}

func errorFrame(code wire.ErrorCode, err error) []byte {
	return wire.AppendError(nil, wire.Error{Code: code, Text: wire.Reason(err)})
}

// buffered raises maxBuffered to n if n is larger.
func (c *counters) buffered(n int) {
	for {
		m := c.maxBuffered.Load()
		if int64(n) <= m || c.maxBuffered.CompareAndSwap(m, int64(n)) {
			return
		}
	}
}
