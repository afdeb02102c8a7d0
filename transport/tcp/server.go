package tcp

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/wire"
)

// Server serves a broker.Broker over TCP with a gnet engine. Its methods are
// safe for concurrent use.
type Server struct {
	broker *broker.Broker
	cfg    serverConfig
	addr   net.Addr
	events *serverEvents
	done   chan struct{} // closed when gnet.Run returned
	runErr error

	listenFD int // a duplicate of gnet's listener, to stop accepting on Close

	closeOnce sync.Once
}

// ServerStats is a snapshot of a Server's counters.
type ServerStats struct {
	Conns       int   // open connections
	Accepted    int64 // connections accepted in total
	Refused     int64 // connections refused by MaxConns
	Timeouts    int64 // connections closed by ReadTimeout or IdleTimeout
	Errors      int64 // connections closed for a protocol or store error
	MaxBuffered int64 // most bytes one connection left buffered (an incomplete frame)
}

// NewServer listens on addr (host:port; port 0 picks one, see Addr) and
// serves b until Close. It returns once the listener is bound.
func NewServer(addr string, b *broker.Broker, opts ...ServerOption) (*Server, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: nil broker", ErrInvalidOption)
	}
	cfg := serverConfig{maxConns: 10000, readTimeout: 10 * time.Second, idleTimeout: time.Minute}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil ServerOption", ErrInvalidOption)
		}
		if err := o.applyServer(&cfg); err != nil {
			return nil, err
		}
	}
	s := &Server{broker: b, cfg: cfg, done: make(chan struct{}), listenFD: -1}
	s.events = newServerEvents(s)
	go func() {
		defer close(s.done)
		s.runErr = gnet.Run(s.events, "tcp://"+addr,
			gnet.WithLogger(quietLogger{}),
			gnet.WithMulticore(cfg.multicore),
			gnet.WithReuseAddr(true),
			gnet.WithTCPNoDelay(gnet.TCPNoDelay),
			gnet.WithTicker(true),
		)
	}()
	// OnBoot learns the address (on gnet's goroutine, before the engine
	// starts: Engine.Dup races with a failing start otherwise); the first
	// OnTick says the event loops run.
	boot := &s.events.boot
	select {
	case <-boot.started:
		if boot.err != nil {
			s.Close(context.Background())
			return nil, boot.err
		}
		s.listenFD, s.addr = boot.listenFD, boot.addr
		return s, nil
	case <-s.done:
		if boot.listenFD >= 0 {
			unix.Close(boot.listenFD)
		}
		err := s.runErr
		if err == nil {
			err = boot.err
		}
		return nil, fmt.Errorf("inflight/tcp: listen %s: %w", addr, err)
	}
}

// listenAddr returns a duplicate of the listener's descriptor, which Close
// uses to stop accepting, and the bound address (gnet's Engine has no Addr).
func listenAddr(eng gnet.Engine) (int, net.Addr, error) {
	fd, err := eng.Dup()
	if err != nil {
		return -1, nil, fmt.Errorf("inflight/tcp: listener address: %w", err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("inflight/tcp: listener address: %w", err)
	}
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return fd, &net.TCPAddr{IP: net.IP(sa.Addr[:]).To16(), Port: sa.Port}, nil
	case *unix.SockaddrInet6:
		return fd, &net.TCPAddr{IP: net.IP(sa.Addr[:]), Port: sa.Port}, nil
	}
	unix.Close(fd)
	return -1, nil, fmt.Errorf("inflight/tcp: listener address: unexpected %T", sa)
}

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.addr }

// Stats returns the server's counters.
func (s *Server) Stats() ServerStats {
	c := &s.events.count
	return ServerStats{
		Conns:       s.events.conns.len(),
		Accepted:    c.accepted.Load(),
		Refused:     c.refused.Load(),
		Timeouts:    c.timeouts.Load(),
		Errors:      c.protocolErrors.Load(),
		MaxBuffered: c.maxBuffered.Load(),
	}
}

// CloseConns closes every open connection (the producers reconnect) and
// keeps serving.
func (s *Server) CloseConns() {
	for _, c := range s.events.conns.snapshot() {
		_ = c.gc.Close()
	}
}

// Close stops accepting, closes every connection (sessions end; producers
// will resend to whoever serves next) and waits for the engine to stop or
// ctx to end, whose error it then returns. Only the first call does this;
// later calls return nil at once, like every Close in inflight.
func (s *Server) Close(ctx context.Context) error {
	var err error
	s.closeOnce.Do(func() {
		// Stop accepting first. gnet hands accepted sockets to its loop
		// through a task queue; a socket accepted while the engine stops is
		// never registered nor closed, and its client hangs. Shutting the
		// listening socket down (through our duplicate; closing it would
		// not affect gnet's) refuses new connections before the stop.
		if s.listenFD >= 0 {
			_ = unix.Shutdown(s.listenFD, unix.SHUT_RDWR)
			_ = unix.Close(s.listenFD)
			s.listenFD = -1
		}
		// Engine.Stop polls for the end every 500ms; ask it to stop with a
		// context that is already done, and wait for gnet.Run instead.
		stopped, cancel := context.WithCancel(context.Background())
		cancel()
		if eng := s.events.boot.eng; eng.Validate() == nil {
			_ = eng.Stop(stopped)
		}
		select {
		case <-s.done:
			reapLeaked(s.addr)
		case <-ctx.Done():
			err = ctx.Err()
		}
	})
	return err
}

// serverConn is one producer's connection: its broker session and the
// timestamps the ticker checks.
type serverConn struct {
	gc       gnet.Conn
	session  *broker.Session
	lastSeen atomic.Int64 // unix ns of the last inbound bytes
	partial  atomic.Int64 // unix ns since an incomplete frame waits; 0: none
}

// Send implements broker.Peer. It runs on the event loop (inside
// OnTraffic), where gnet's Write is allowed and copies what the socket does
// not take.
func (c *serverConn) Send(frame []byte) error {
	_, err := c.gc.Write(frame)
	return err
}

// Close implements broker.Peer; safe from any goroutine.
func (c *serverConn) Close() error { return c.gc.Close() }

func errorFrame(code wire.ErrorCode, err error) []byte {
	return wire.AppendError(nil, wire.Error{Code: code, Text: err.Error()})
}
