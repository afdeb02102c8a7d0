package tcp

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/wire"
)

// serverEvents is the gnet event handler of a Server. It only dispatches:
// start-up belongs to boot, the open connections to conns, the numbers
// Stats reports to count.
type serverEvents struct {
	gnet.BuiltinEventEngine
	s     *Server
	boot  startup
	conns registry
	count counters
}

func newServerEvents(s *Server) *serverEvents {
	return &serverEvents{
		s:     s,
		boot:  startup{started: make(chan struct{}), listenFD: -1},
		conns: registry{conns: make(map[*serverConn]struct{})},
	}
}

// startup is what NewServer learns while the engine starts. OnBoot writes
// the fields on gnet's goroutine; they are read after started is closed or
// gnet.Run has returned.
type startup struct {
	eng      gnet.Engine
	listenFD int // a duplicate of the listener (see listenAddr)
	addr     net.Addr
	err      error
	started  chan struct{} // closed by the first OnTick: the loops run
	once     sync.Once
}

// ready closes started, once.
func (b *startup) ready() { b.once.Do(func() { close(b.started) }) }

// registry is the set of open connections, for MaxConns, the ticker and
// CloseConns. Safe for concurrent use.
type registry struct {
	mu    sync.Mutex
	conns map[*serverConn]struct{}
}

// add registers c unless max connections are open; false if refused.
func (r *registry) add(c *serverConn, max int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.conns) >= max {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *registry) remove(c *serverConn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
}

func (r *registry) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.conns)
}

// snapshot returns the open connections, to act on without the lock.
func (r *registry) snapshot() []*serverConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	cs := make([]*serverConn, 0, len(r.conns))
	for c := range r.conns {
		cs = append(cs, c)
	}
	return cs
}

// counters are the totals ServerStats reports; each is updated atomically.
type counters struct {
	accepted, refused, timeouts, protocolErrors, maxBuffered atomic.Int64
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

func (e *serverEvents) OnBoot(eng gnet.Engine) gnet.Action {
	e.boot.eng = eng
	e.boot.listenFD, e.boot.addr, e.boot.err = listenAddr(eng)
	if e.boot.err != nil {
		return gnet.Shutdown
	}
	return gnet.None
}

func (e *serverEvents) OnOpen(gc gnet.Conn) ([]byte, gnet.Action) {
	c := &serverConn{gc: gc}
	c.lastSeen.Store(time.Now().UnixNano())
	if !e.conns.add(c, e.s.cfg.maxConns) {
		e.count.refused.Add(1)
		return errorFrame(wire.CodeProtocol, ErrTooManyConns), gnet.Close
	}
	c.session = e.s.broker.NewSession(c)
	e.count.accepted.Add(1)
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
		e.count.protocolErrors.Add(1)
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
	e.count.buffered(left)
	return gnet.None
}

// isSessionError reports whether err came from broker.Session.Handle, which
// has already answered with an ERROR frame when one was due.
func isSessionError(err error) bool {
	return errors.Is(err, broker.ErrProtocol) || errors.Is(err, broker.ErrStore) ||
		errors.Is(err, broker.ErrReplaced) || errors.Is(err, broker.ErrSessionClosed) ||
		errors.Is(err, broker.ErrUnauthorized)
}

func (e *serverEvents) OnClose(gc gnet.Conn, _ error) gnet.Action {
	c, ok := gc.Context().(*serverConn)
	if !ok {
		return gnet.None
	}
	e.conns.remove(c)
	c.session.Close()
	return gnet.None
}

// OnTick closes connections that trickle a frame or went silent. It runs on
// gnet's ticker goroutine: AsyncWrite and Close are safe there, and the
// write is queued before the close.
func (e *serverEvents) OnTick() (time.Duration, gnet.Action) {
	e.boot.ready()
	cfg := e.s.cfg
	now := time.Now().UnixNano()
	for _, c := range e.conns.snapshot() {
		var why error
		if p := c.partial.Load(); p != 0 && now-p > int64(cfg.readTimeout) {
			why = ErrReadTimeout
		} else if now-c.lastSeen.Load() > int64(cfg.idleTimeout) {
			why = ErrIdle
		}
		if why != nil {
			e.count.timeouts.Add(1)
			c.partial.Store(0)
			c.lastSeen.Store(now) // do not count it twice while it closes
			_ = c.gc.AsyncWrite(errorFrame(wire.CodeProtocol, why), nil)
			_ = c.gc.Close()
		}
	}
	return min(cfg.readTimeout, cfg.idleTimeout) / 4, gnet.None
}
