package tcp

import (
	"context"
	"errors"
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

// ServerOption configures a Server.
type ServerOption interface{ applyServer(*serverConfig) error }

type serverOptionFunc func(*serverConfig) error

func (f serverOptionFunc) applyServer(c *serverConfig) error { return f(c) }

type serverConfig struct {
	multicore   bool
	maxConns    int
	readTimeout time.Duration
	idleTimeout time.Duration
}

// Multicore runs one event loop per CPU instead of one (default false).
func Multicore(on bool) ServerOption {
	return serverOptionFunc(func(c *serverConfig) error { c.multicore = on; return nil })
}

// MaxConns limits open connections (default 10000); a connection beyond it
// gets an ERROR frame and is closed.
func MaxConns(n int) ServerOption {
	return serverOptionFunc(func(c *serverConfig) error {
		if n <= 0 {
			return fmt.Errorf("%w: MaxConns %d must be positive", ErrInvalidOption, n)
		}
		c.maxConns = n
		return nil
	})
}

// ReadTimeout bounds how long a frame may stay incomplete once its first
// bytes arrived (default 10s): a sender that trickles a frame (slowloris)
// gets an ERROR frame and is closed.
func ReadTimeout(d time.Duration) ServerOption {
	return durationOption("ReadTimeout", d, func(c *serverConfig) { c.readTimeout = d })
}

// IdleTimeout closes a connection that sent nothing for d (default 60s).
// Producers send a PING after a heartbeat interval of silence, so a live
// producer is never idle that long.
func IdleTimeout(d time.Duration) ServerOption {
	return durationOption("IdleTimeout", d, func(c *serverConfig) { c.idleTimeout = d })
}

// durationOption validates a positive duration before set stores it.
func durationOption(name string, d time.Duration, set func(*serverConfig)) ServerOption {
	return serverOptionFunc(func(c *serverConfig) error {
		if d <= 0 {
			return fmt.Errorf("%w: %s %v must be positive", ErrInvalidOption, name, d)
		}
		set(c)
		return nil
	})
}

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
	s.events = &serverEvents{s: s, started: make(chan struct{}), conns: make(map[*serverConn]struct{})}
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
	select {
	case <-s.events.started:
		if s.events.bootErr != nil {
			s.Close(context.Background())
			return nil, s.events.bootErr
		}
		s.listenFD, s.addr = s.events.listenFD, s.events.addr
		return s, nil
	case <-s.done:
		if s.events.listenFD >= 0 {
			unix.Close(s.events.listenFD)
		}
		err := s.runErr
		if err == nil {
			err = s.events.bootErr
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
	e := s.events
	e.mu.Lock()
	n := len(e.conns)
	e.mu.Unlock()
	return ServerStats{
		Conns:       n,
		Accepted:    e.accepted.Load(),
		Refused:     e.refused.Load(),
		Timeouts:    e.timeouts.Load(),
		Errors:      e.errors.Load(),
		MaxBuffered: e.maxBuffered.Load(),
	}
}

// CloseConns closes every open connection (the producers reconnect) and
// keeps serving.
func (s *Server) CloseConns() {
	for _, c := range s.events.snapshot() {
		_ = c.gc.Close()
	}
}

// Close stops accepting, closes every connection (sessions end; producers
// will resend to whoever serves next) and waits for the engine to stop or
// ctx to end. It returns ErrServerClosed after the first call.
func (s *Server) Close(ctx context.Context) error {
	err := ErrServerClosed
	s.closeOnce.Do(func() {
		err = nil
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
		if eng := s.events.eng; eng.Validate() == nil {
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

type serverEvents struct {
	gnet.BuiltinEventEngine
	s *Server
	// Set by OnBoot, read after started is closed or Run returned.
	eng      gnet.Engine
	listenFD int
	addr     net.Addr
	bootErr  error
	started  chan struct{} // closed by the first OnTick
	tickOnce sync.Once

	mu    sync.Mutex
	conns map[*serverConn]struct{}

	accepted, refused, timeouts, errors, maxBuffered atomic.Int64
}

func (e *serverEvents) OnBoot(eng gnet.Engine) gnet.Action {
	e.eng = eng
	e.listenFD, e.addr, e.bootErr = listenAddr(eng)
	if e.bootErr != nil {
		return gnet.Shutdown
	}
	return gnet.None
}

func (e *serverEvents) snapshot() []*serverConn {
	e.mu.Lock()
	defer e.mu.Unlock()
	cs := make([]*serverConn, 0, len(e.conns))
	for c := range e.conns {
		cs = append(cs, c)
	}
	return cs
}

func (e *serverEvents) OnOpen(gc gnet.Conn) ([]byte, gnet.Action) {
	e.mu.Lock()
	if len(e.conns) >= e.s.cfg.maxConns {
		e.mu.Unlock()
		e.refused.Add(1)
		return errorFrame(wire.CodeProtocol, ErrTooManyConns), gnet.Close
	}
	c := &serverConn{gc: gc}
	c.session = e.s.broker.NewSession(c)
	c.lastSeen.Store(time.Now().UnixNano())
	e.conns[c] = struct{}{}
	e.mu.Unlock()
	e.accepted.Add(1)
	gc.SetContext(c)
	return nil, gnet.None
}

func (e *serverEvents) OnTraffic(gc gnet.Conn) gnet.Action {
	c, ok := gc.Context().(*serverConn)
	if !ok {
		return gnet.Close
	}
	now := time.Now().UnixNano()
	c.lastSeen.Store(now)
	left, err := readFrames(gc, e.s.broker.MaxFrameSize(), c.session.Handle)
	if err != nil {
		e.errors.Add(1)
		if !isSessionError(err) {
			// A bad length prefix: the session never saw the frame.
			_, _ = gc.Write(errorFrame(wire.CodeOf(err), err))
		}
		return gnet.Close
	}
	switch {
	case left == 0:
		c.partial.Store(0)
	case c.partial.Load() == 0:
		c.partial.Store(now)
	}
	for {
		m := e.maxBuffered.Load()
		if int64(left) <= m || e.maxBuffered.CompareAndSwap(m, int64(left)) {
			break
		}
	}
	return gnet.None
}

// isSessionError reports whether err came from broker.Session.Handle, which
// has already answered with an ERROR frame when one was due.
func isSessionError(err error) bool {
	return errors.Is(err, broker.ErrProtocol) || errors.Is(err, broker.ErrStore) ||
		errors.Is(err, broker.ErrReplaced) || errors.Is(err, broker.ErrSessionClosed)
}

func (e *serverEvents) OnClose(gc gnet.Conn, _ error) gnet.Action {
	c, ok := gc.Context().(*serverConn)
	if !ok {
		return gnet.None
	}
	e.mu.Lock()
	delete(e.conns, c)
	e.mu.Unlock()
	c.session.Close()
	return gnet.None
}

// OnTick closes connections that trickle a frame or went silent. It runs on
// gnet's ticker goroutine: AsyncWrite and Close are safe there, and the
// write is queued before the close.
func (e *serverEvents) OnTick() (time.Duration, gnet.Action) {
	e.tickOnce.Do(func() { close(e.started) })
	cfg := e.s.cfg
	now := time.Now().UnixNano()
	for _, c := range e.snapshot() {
		var why error
		if p := c.partial.Load(); p != 0 && now-p > int64(cfg.readTimeout) {
			why = ErrReadTimeout
		} else if now-c.lastSeen.Load() > int64(cfg.idleTimeout) {
			why = ErrIdle
		}
		if why != nil {
			e.timeouts.Add(1)
			c.partial.Store(0)
			c.lastSeen.Store(now) // do not count it twice while it closes
			_ = c.gc.AsyncWrite(errorFrame(wire.CodeProtocol, why), nil)
			_ = c.gc.Close()
		}
	}
	return min(cfg.readTimeout, cfg.idleTimeout) / 4, gnet.None
}

func errorFrame(code wire.ErrorCode, err error) []byte {
	return wire.AppendError(nil, wire.Error{Code: code, Text: err.Error()})
}
