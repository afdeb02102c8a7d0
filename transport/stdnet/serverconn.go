package stdnet

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/wire"
)

// serverConn is one producer's connection on a Server. One goroutine,
// serve, does everything: the TLS handshake, reading frames, handing them
// to the broker session, and writing the session's replies. Replies are
// buffered and flushed whenever the reader is about to wait for the
// network, so a burst of batches gets one write of receipts.
//
// Deadlines replace a ticker: before waiting for a new frame the read
// deadline is IdleTimeout away; at the first wait inside a frame it is
// ReadTimeout away, and stays there until the frame is complete, however
// slowly its bytes trickle. Every flush has WriteTimeout.
type serverConn struct {
	s       *Server
	raw     net.Conn // the socket
	rw      net.Conn // raw, or the tls.Conn over it
	out     *bufio.Writer
	session *broker.Session

	stopping atomic.Bool // Server.Close: read no further frame
}

func newServerConn(s *Server, raw net.Conn) *serverConn {
	return &serverConn{s: s, raw: raw, rw: raw}
}

// Send implements broker.Peer: it buffers frame (copied) for the next
// flush. It runs on serve's goroutine, as the session does.
func (c *serverConn) Send(frame []byte) error {
	if len(frame) > c.out.Available() && c.out.Buffered() > 0 {
		if err := c.flush(); err != nil {
			return err
		}
	}
	if len(frame) > c.out.Available() {
		_ = c.rw.SetWriteDeadline(time.Now().Add(c.s.cfg.writeTimeout))
	}
	_, err := c.out.Write(frame)
	return err
}

// Close implements broker.Peer: it closes the socket, which ends serve.
// Idempotent and safe from any goroutine (another session taking over this
// producer name calls it).
func (c *serverConn) Close() error {
	_ = c.raw.Close()
	return nil
}

var _ broker.CertificatePeer = (*serverConn)(nil)

// VerifiedCertificates implements broker.CertificatePeer: the client
// certificate chain the TLS handshake verified (RequireClientCert, or a
// ServerTLS config that verifies client certificates), leaf first; nil
// without TLS, without a client certificate, or for one that was not
// verified. It runs on serve's goroutine, after the handshake.
func (c *serverConn) VerifiedCertificates() []*x509.Certificate {
	tc, ok := c.rw.(*tls.Conn)
	if !ok {
		return nil
	}
	if chains := tc.ConnectionState().VerifiedChains; len(chains) > 0 {
		return chains[0]
	}
	return nil
}

// stop makes serve stop reading: its pending read returns at once, it
// flushes what it owes and closes (see Server.Close).
func (c *serverConn) stop() {
	c.stopping.Store(true)
	_ = c.raw.SetReadDeadline(time.Now())
}

func (c *serverConn) flush() error {
	if c.out.Buffered() == 0 {
		return nil
	}
	_ = c.rw.SetWriteDeadline(time.Now().Add(c.s.cfg.writeTimeout))
	return c.out.Flush()
}

// idle implements waiter: flush the replies, then wait at most IdleTimeout
// for the next frame.
func (c *serverConn) idle() error {
	if err := c.flush(); err != nil {
		return err
	}
	return c.deadline(c.s.cfg.idleTimeout)
}

// started implements waiter: the frame begun must be complete within
// ReadTimeout.
func (c *serverConn) started() error {
	if err := c.flush(); err != nil {
		return err
	}
	return c.deadline(c.s.cfg.readTimeout)
}

// deadline sets the read deadline d from now, unless the server is
// closing. stop stores the flag before its own deadline, so one of the two
// sees the other: a deadline set here never hides stop's.
func (c *serverConn) deadline(d time.Duration) error {
	_ = c.raw.SetReadDeadline(time.Now().Add(d))
	if c.stopping.Load() {
		return errStopping
	}
	return nil
}

// errStopping ends serve's loop when the server closes.
var errStopping = errors.New("inflight/stdnet: server closing")

// serve runs the connection until it ends, then releases everything.
func (c *serverConn) serve() {
	defer c.s.unregister(c)
	defer c.raw.Close()
	if c.s.tls != nil {
		if err := c.handshake(); err != nil {
			c.s.count.handshakes.Add(1)
			return
		}
	}
	c.out = bufio.NewWriterSize(c.rw, 16<<10)
	c.session = c.s.broker.NewSession(c)
	defer c.session.Close()
	fr := newFrameReader(c.rw, 64<<10, c.s.broker.MaxFrameSize(), c)
	c.s.count.buffered(fr.buffered())
	fr.grew = c.s.count.buffered
	var err error
	for {
		var frame []byte
		if frame, err = fr.next(); err != nil {
			break
		}
		if err = c.session.Handle(frame); err != nil {
			break
		}
	}
	c.end(err)
}

// handshake completes the TLS handshake within HandshakeTimeout.
func (c *serverConn) handshake() error {
	_ = c.raw.SetDeadline(time.Now().Add(c.s.cfg.handshake))
	tc := tls.Server(c.raw, c.s.tls)
	if err := tc.HandshakeContext(c.s.ctx); err != nil {
		return err
	}
	_ = c.raw.SetDeadline(time.Time{})
	c.rw = tc
	return nil
}

// end finishes a connection whose loop stopped with err: it answers a
// violation with an ERROR frame (the session answered its own), flushes,
// and closes.
func (c *serverConn) end(err error) {
	switch {
	case c.stopping.Load():
		_ = c.flush()
		return
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
	if c.flush() == nil {
		c.linger()
	}
}

// linger lets the ERROR frame reach the producer: closing a socket with
// unread input resets it, and a reset can discard what the peer has not
// read yet. It half-closes, then reads and drops whatever the peer still
// sends, for a moment at most.
func (c *serverConn) linger() {
	tc, ok := c.raw.(*net.TCPConn)
	if !ok {
		return
	}
	if t, ok := c.rw.(*tls.Conn); ok {
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
		errors.Is(err, broker.ErrUnauthorized)
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
