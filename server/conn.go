package server

import (
	"container/list"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/wire"
	"github.com/inflightmq/inflight/wire/frames"
)

// conn is one producer's connection. Its goroutine, serve, does the TLS
// handshake, reads frames and hands them to the broker session; the
// session's replies are written by whichever goroutine sends them (serve,
// or the session's appender for receipts), one at a time.
//
// Deadlines replace a ticker: before waiting for a new frame the read
// deadline is IdleTimeout away; at the first wait inside a frame it is
// ReadTimeout away, and stays there until the frame is complete, however
// slowly its bytes trickle. Until its HELLO is read, a connection is
// pending, and no deadline is later than HandshakeTimeout after accept.
// Every write has WriteTimeout.
type conn struct {
	s       *Server
	raw     net.Conn // the socket
	rw      net.Conn // raw, or the tls.Conn over it
	session transport.Session
	helloBy time.Time // accept + HandshakeTimeout

	// pending is c's element in Server.pending while c is pending; nil
	// once its HELLO was read or it was evicted. Guarded by Server.mu.
	pending *list.Element

	// serve's own: the HELLO was read; the last read deadline set was
	// helloBy (a timeout is a handshake timeout).
	helloSeen, byHello bool

	wmu sync.Mutex // one Send at a time

	stopping atomic.Bool // Server.Close: read no further frame
	ending   atomic.Bool // the session ended the connection (Close)
	evicted  atomic.Bool // pending, and its place given to a newer connection
}

func newConn(s *Server, raw net.Conn) *conn {
	return &conn{s: s, raw: raw, rw: raw, helloBy: time.Now().Add(s.cfg.handshake)}
}

// Send implements transport.Peer: it writes frame within WriteTimeout.
// Safe for concurrent use.
func (c *conn) Send(frame []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.rw.SetWriteDeadline(time.Now().Add(c.s.cfg.writeTimeout))
	_, err := c.rw.Write(frame)
	return err
}

// Close implements transport.Peer: serve stops reading and ends the
// connection as after a refused frame, letting what was sent reach the
// producer. Idempotent and safe from any goroutine: another session that
// takes over this producer name calls it, and this one when its store
// failed.
func (c *conn) Close() error {
	c.ending.Store(true)
	_ = c.raw.SetReadDeadline(time.Now())
	return nil
}

var _ broker.CertificatePeer = (*conn)(nil)

// VerifiedCertificates implements broker.CertificatePeer: the client
// certificate chain the TLS handshake verified (RequireClientCert, or a
// TLS config that verifies client certificates), leaf first; nil without
// TLS, without a client certificate, or for one that was not verified. It
// runs on serve's goroutine, after the handshake.
func (c *conn) VerifiedCertificates() []*x509.Certificate {
	tc, ok := c.rw.(*tls.Conn)
	if !ok {
		return nil
	}
	if chains := tc.ConnectionState().VerifiedChains; len(chains) > 0 {
		return chains[0]
	}
	return nil
}

// cut closes the socket at once: serve's read or write fails and it ends
// (see Server.CloseConns). Safe from any goroutine.
func (c *conn) cut() { _ = c.raw.Close() }

// stop makes serve stop reading: its pending read returns at once, and it
// closes the connection (see Server.Close).
func (c *conn) stop() {
	c.stopping.Store(true)
	_ = c.raw.SetReadDeadline(time.Now())
}

// evict ends a pending connection whose place a newer one took: its TLS
// handshake or read returns at once, and serve reports ErrTooManyPending.
func (c *conn) evict() {
	c.evicted.Store(true)
	_ = c.raw.SetDeadline(time.Now())
}

// Idle implements frames.Waiter: wait at most IdleTimeout for the next
// frame.
func (c *conn) Idle() error { return c.deadline(c.s.cfg.idleTimeout) }

// Started implements frames.Waiter: the frame begun must be complete within
// ReadTimeout.
func (c *conn) Started() error { return c.deadline(c.s.cfg.readTimeout) }

// deadline sets the read deadline d from now, or at helloBy if that is
// sooner and the HELLO has not been read, unless the connection is ending.
// stop, Close and evict store their flag before their own deadline, so one
// of the two sees the other: a deadline set here never hides theirs.
func (c *conn) deadline(d time.Duration) error {
	t := time.Now().Add(d)
	c.byHello = !c.helloSeen && c.helloBy.Before(t)
	if c.byHello {
		t = c.helloBy
	}
	_ = c.raw.SetReadDeadline(t)
	if c.stopping.Load() || c.ending.Load() || c.evicted.Load() {
		return errStopping
	}
	return nil
}

// errStopping ends serve's loop when the server or the session ends the
// connection.
var errStopping = errors.New("inflight/server: connection ending")

// serve runs the connection until it ends, then releases everything. The
// session's Close waits for its appender, so what was read is stored (or
// failed) before the socket closes.
func (c *conn) serve() {
	defer c.s.unregister(c)
	defer c.raw.Close()
	if c.s.tls != nil {
		if err := c.handshake(); err != nil {
			c.handshakeFailed(err)
			return
		}
	}
	c.session = c.s.broker.Accept(c)
	fr := frames.NewReader(c.rw, readBuffer, c.s.broker.MaxFrameSize(), c)
	fr.IdleTimeout, fr.ReadTimeout = ErrIdle, ErrReadTimeout
	c.s.count.buffered(fr.Held())
	fr.Grew = c.s.count.buffered
	keeper, _ := c.session.(transport.Keeper)
	var err error
	for {
		var frame []byte
		if frame, err = fr.Next(); err != nil {
			break
		}
		if !c.helloSeen {
			if typ, _ := wire.TypeOf(frame); typ == wire.TypeHello {
				// No longer pending, however long the broker takes to
				// answer (it reads the Store): c cannot be evicted now.
				if !c.s.helloRead(c) {
					err = errStopping // evicted meanwhile
					break
				}
				c.helloSeen = true
			}
		}
		if keeper != nil {
			if keep := fr.Keep(); keep != nil {
				// A large frame, in a buffer of its own: the session keeps
				// it until stored instead of copying it.
				if err = keeper.HandleKeep(frame, keep); err != nil {
					break
				}
				continue
			}
		}
		if err = c.session.Handle(frame); err != nil {
			break
		}
	}
	c.session.Close()
	c.end(err)
}

// readBuffer is the size of a connection's read buffer, which it holds
// for its life: many small frames (PINGs, small batches) cost one read, and
// a frame up to this size is handed to the session without a copy. A
// larger frame is read into a buffer of the frames package's pool, held
// only until the next frame (a producer's batch under load: read straight
// from the socket into it).
const readBuffer = 4 << 10

// handshake completes the TLS handshake by helloBy.
func (c *conn) handshake() error {
	_ = c.raw.SetDeadline(c.helloBy)
	if c.evicted.Load() { // evict's deadline may have come first
		return errStopping
	}
	tc := tls.Server(c.raw, c.s.tls)
	if err := tc.HandshakeContext(c.s.ctx); err != nil {
		return err
	}
	_ = c.raw.SetWriteDeadline(time.Time{})
	c.rw = tc
	return nil
}

// handshakeFailed reports a failed TLS handshake once, under its cause: the
// connection was evicted, the handshake timed out, the client did not speak
// TLS (it is told so in a plain ERROR frame), or a TLS error.
func (c *conn) handshakeFailed(err error) {
	var rh tls.RecordHeaderError
	switch {
	case c.s.ctx.Err() != nil: // Server.Close
		return
	case c.evicted.Load():
		c.s.reportRefusal(c.raw.RemoteAddr(), ErrTooManyPending)
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.s.reportRefusal(c.raw.RemoteAddr(), fmt.Errorf("%w (%v)", ErrHandshakeTimeout, c.s.cfg.handshake))
	case errors.As(err, &rh) && rh.Conn != nil:
		// Its first bytes are not a TLS record: most likely a producer
		// without TLS, which reads a plain ERROR frame.
		c.s.reportRefusal(c.raw.RemoteAddr(), ErrNotTLS)
		_ = c.raw.SetWriteDeadline(time.Now().Add(c.s.cfg.writeTimeout))
		_, _ = c.raw.Write(errorFrame(wire.CodeProtocol, ErrNotTLS))
		c.linger()
	default:
		c.s.reportRefusal(c.raw.RemoteAddr(), fmt.Errorf("%w: %w", ErrTLSHandshake, err))
	}
}

// end finishes a connection whose loop stopped with err: it answers a
// violation with an ERROR frame (the session answered its own), and lets
// the producer read what was sent before it closes.
func (c *conn) end(err error) {
	switch {
	case c.stopping.Load():
		return
	case c.evicted.Load():
		// A flood's connection, most likely: told, not waited for.
		c.s.reportRefusal(c.raw.RemoteAddr(), ErrTooManyPending)
		_ = c.Send(errorFrame(wire.CodeProtocol, ErrTooManyPending))
		return
	case c.ending.Load():
		// The session sent its ERROR (or its name was taken over).
	case c.byHello && (errors.Is(err, ErrIdle) || errors.Is(err, ErrReadTimeout)):
		err = fmt.Errorf("%w (%v)", ErrHandshakeTimeout, c.s.cfg.handshake)
		c.s.reportRefusal(c.raw.RemoteAddr(), err)
		_ = c.Send(errorFrame(wire.CodeProtocol, err))
	case errors.Is(err, ErrIdle), errors.Is(err, ErrReadTimeout):
		c.s.count.timeouts.Add(1)
		_ = c.Send(errorFrame(wire.CodeProtocol, err))
	case errors.Is(err, wire.ErrFrameTooLarge), errors.Is(err, wire.ErrMalformed):
		// A bad length prefix: the session never saw the frame.
		c.s.count.protocolErrors.Add(1)
		_ = c.Send(errorFrame(wire.CodeOf(err), err))
	case isSessionError(err):
		c.s.count.protocolErrors.Add(1)
	default: // the peer hung up, or the socket failed: nobody to tell
		return
	}
	c.linger()
}

// linger lets the last frames reach the producer: closing a socket with
// unread input resets it, and a reset can discard what the peer has not
// read yet. It half-closes, then reads and drops whatever the peer still
// sends, for a moment at most.
func (c *conn) linger() { linger(c.raw, c.rw) }

// linger is conn.linger for the socket raw, read and written as rw (raw,
// or a tls.Conn over it).
func linger(raw, rw net.Conn) {
	tc, ok := raw.(*net.TCPConn)
	if !ok {
		return
	}
	if t, ok := rw.(*tls.Conn); ok {
		_ = t.CloseWrite() // close_notify, then FIN
	} else {
		_ = tc.CloseWrite()
	}
	_ = tc.SetReadDeadline(time.Now().Add(lingerTime))
	_, _ = io.Copy(io.Discard, io.LimitReader(tc, 1<<20))
}

const lingerTime = 200 * time.Millisecond

// isSessionError reports whether err came from broker.Session.Handle, which
// has already answered with an ERROR frame when one was due.
func isSessionError(err error) bool {
	return errors.Is(err, broker.ErrProtocol) || errors.Is(err, broker.ErrStore) ||
		errors.Is(err, broker.ErrReplaced) || errors.Is(err, broker.ErrSessionClosed) ||
		errors.Is(err, broker.ErrUnauthorized) || errors.Is(err, broker.ErrFenced) ||
		errors.Is(err, broker.ErrNameInUse)
}
