package natsjs

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// pubConn is the store's own connection to NATS for writing records: the
// store builds the protocol frames (HPUB) of a batch itself and writes
// many at once. Two things need it: a record's headers go to the server in
// the order the producer gave them (nats.go writes a message's headers from
// a map, in random key order, and has no way to publish a header block as
// it is), and a batch costs one write per chunk instead of one lock, one
// header map and one encoding per message.
//
// It dials the server nc is connected to, with nc's options (the dialer,
// TLS, credentials), at its first use and again after it broke; it
// subscribes to nothing (the server's replies go to subjects nc
// subscribed). It answers the server's PINGs on a goroutine of its own,
// which exits when the connection ends. Safe for concurrent use.
type pubConn struct {
	nc      *nats.Conn
	timeout time.Duration // bounds a dial with its handshake, and each write

	mu     sync.Mutex // held while dialing and writing
	cur    *pubLink   // nil: none; dial at the next send
	closed bool
	dials  int            // connections made (tests)
	reader sync.WaitGroup // the links' reader goroutines
}

// pubLink is one connection of a pubConn. done is closed when it ended
// (err says why, set before).
type pubLink struct {
	conn       net.Conn
	maxPayload int
	done       chan struct{}
	err        error
}

// ended returns why l ended, nil while it is up.
func (l *pubLink) ended() error {
	select {
	case <-l.done:
		return l.err
	default:
		return nil
	}
}

func newPubConn(nc *nats.Conn, timeout time.Duration) *pubConn {
	return &pubConn{nc: nc, timeout: timeout}
}

// errLinkChanged: a batch's next chunk would go on another connection than
// its first (the one it started on broke): the server would see a gap.
var errLinkChanged = errors.New("the store's publish connection broke during the batch")

// errPubClosed: the store was closed.
var errPubClosed = errors.New("the store is closed")

// link returns the current connection, dialing one if there is none.
func (p *pubConn) link() (*pubLink, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.linkLocked()
}

func (p *pubConn) linkLocked() (*pubLink, error) {
	if p.closed {
		return nil, errPubClosed
	}
	if p.cur != nil {
		return p.cur, nil
	}
	l, br, err := p.dial()
	if err != nil {
		return nil, withCause(err)
	}
	p.cur = l
	p.dials++
	p.reader.Add(1)
	go p.read(l, br)
	return l, nil
}

// send writes b, whole frames, on l; it fails if l is no longer the
// current connection (errLinkChanged) or the write fails (l then ends).
func (p *pubConn) send(l *pubLink, b []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur != l {
		if l.err != nil {
			return l.err
		}
		return errLinkChanged
	}
	_ = l.conn.SetWriteDeadline(time.Now().Add(p.timeout))
	if _, err := l.conn.Write(b); err != nil {
		err = &causeError{ErrUnreachable, "writing to the server failed", err}
		p.endLocked(l, err)
		return err
	}
	return nil
}

// end ends l with err if it is still the current connection (a writer
// that got no reply in time drops a connection that may be dead).
func (p *pubConn) end(l *pubLink, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLocked(l, err)
}

func (p *pubConn) endLocked(l *pubLink, err error) {
	if p.cur != l {
		return
	}
	p.cur = nil
	l.err = err
	close(l.done)
	_ = l.conn.Close() // the reader returns
}

// close ends the connection for good and waits for its reader.
func (p *pubConn) close() {
	p.mu.Lock()
	p.closed = true
	if p.cur != nil {
		p.endLocked(p.cur, errPubClosed)
	}
	p.mu.Unlock()
	p.reader.Wait()
}

// read serves the server's side of l: PING is answered, -ERR ends l (the
// server closes the connection after most of them, and a refused publish,
// a permissions violation, would otherwise only show as a missing reply),
// a read error ends it.
func (p *pubConn) read(l *pubLink, br *bufio.Reader) {
	defer p.reader.Done()
	for {
		line, err := br.ReadSlice('\n')
		for err == bufio.ErrBufferFull { // a long INFO (cluster URLs): skip it
			line = nil
			_, err = br.ReadSlice('\n')
		}
		if err != nil {
			p.end(l, &causeError{ErrUnreachable, "connection lost", err})
			return
		}
		switch op := protoOp(line); op {
		case "PING":
			p.mu.Lock()
			if p.cur == l {
				_ = l.conn.SetWriteDeadline(time.Now().Add(p.timeout))
				if _, err := l.conn.Write([]byte("PONG\r\n")); err != nil {
					p.endLocked(l, &causeError{ErrUnreachable, "writing to the server failed", err})
				}
			}
			p.mu.Unlock()
		case "-ERR":
			p.end(l, fmt.Errorf("nats: the server refused the store's publish connection: %s", bytes.TrimSpace(line[4:])))
			return
		}
	}
}

// protoOp returns the operation of a protocol line, upper case.
func protoOp(line []byte) string {
	i := bytes.IndexAny(line, " \t\r\n")
	if i < 0 {
		i = len(line)
	}
	return string(bytes.ToUpper(line[:i]))
}

// serverInfo is what the store reads of the server's INFO.
type serverInfo struct {
	Headers      bool   `json:"headers"`
	MaxPayload   int    `json:"max_payload"`
	TLSRequired  bool   `json:"tls_required"`
	TLSAvailable bool   `json:"tls_available"`
	Nonce        string `json:"nonce"`
}

// connectInfo is the CONNECT the store sends; the credentials are nc's,
// read as nats.go reads them.
type connectInfo struct {
	Verbose      bool   `json:"verbose"`
	Pedantic     bool   `json:"pedantic"`
	JWT          string `json:"jwt,omitempty"`
	Nkey         string `json:"nkey,omitempty"`
	Sig          string `json:"sig,omitempty"`
	User         string `json:"user,omitempty"`
	Pass         string `json:"pass,omitempty"`
	Token        string `json:"auth_token,omitempty"`
	TLS          bool   `json:"tls_required"`
	Name         string `json:"name"`
	Lang         string `json:"lang"`
	Version      string `json:"version"`
	Protocol     int    `json:"protocol"`
	Echo         bool   `json:"echo"`
	Headers      bool   `json:"headers"`
	NoResponders bool   `json:"no_responders"`
}

// dial connects to the server nc is connected to, as nats.go would
// (handshake bounded by the store's Timeout), and returns the link and the
// reader of the server's side.
func (p *pubConn) dial() (*pubLink, *bufio.Reader, error) {
	raw := p.nc.ConnectedUrl()
	if raw == "" {
		if p.nc.IsClosed() {
			return nil, nil, nats.ErrConnectionClosed
		}
		return nil, nil, nats.ErrConnectionReconnecting
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("nats: server URL: %w", err)
	}
	o := &p.nc.Opts
	switch {
	case u.Scheme != "nats" && u.Scheme != "tls":
		return nil, nil, fmt.Errorf("%w: the store writes through a connection of its own, which does not speak %s://", ErrInvalidConfig, u.Scheme)
	case o.ProxyPath != "":
		return nil, nil, fmt.Errorf("%w: the store writes through a connection of its own, which does not use a proxy path", ErrInvalidConfig)
	}
	var conn net.Conn
	if o.InProcessServer != nil {
		conn, err = o.InProcessServer.InProcessConn()
	} else {
		var d nats.CustomDialer = o.CustomDialer
		if d == nil {
			nd := net.Dialer{Timeout: p.timeout}
			if o.Dialer != nil {
				nd = *o.Dialer
			}
			d = &nd
		}
		conn, err = d.Dial("tcp", u.Host)
	}
	if err != nil {
		return nil, nil, &causeError{ErrUnreachable, "", err}
	}
	l, br, err := p.handshake(conn, u)
	if err != nil {
		_ = conn.Close()
		return nil, nil, err
	}
	return l, br, nil
}

// handshake reads the server's INFO, sets up TLS where nc has it or the
// server asks for it, sends CONNECT and waits for the PONG of a PING.
func (p *pubConn) handshake(conn net.Conn, u *url.URL) (*pubLink, *bufio.Reader, error) {
	_ = conn.SetDeadline(time.Now().Add(p.timeout))
	o := &p.nc.Opts
	skipTLS := false
	if sd, ok := o.CustomDialer.(interface{ SkipTLSHandshake() bool }); ok {
		skipTLS = sd.SkipTLSHandshake()
	}
	secure := o.Secure || u.Scheme == "tls"
	var err error
	if secure && o.TLSHandshakeFirst && !skipTLS {
		if conn, err = p.tlsClient(conn, u); err != nil {
			return nil, nil, err
		}
	}
	br := bufio.NewReaderSize(conn, 4096)
	line, err := br.ReadBytes('\n')
	if err != nil {
		return nil, nil, &causeError{ErrUnreachable, "no INFO from the server", err}
	}
	if protoOp(line) != "INFO" {
		return nil, nil, fmt.Errorf("nats: expected INFO from the server, got %.100q", line)
	}
	var info serverInfo
	if err := json.Unmarshal(bytes.TrimSpace(line[4:]), &info); err != nil {
		return nil, nil, fmt.Errorf("nats: the server's INFO: %w", err)
	}
	switch {
	case !info.Headers:
		return nil, nil, errors.New("nats: the server does not support headers")
	case secure && !info.TLSRequired && !info.TLSAvailable:
		return nil, nil, fmt.Errorf("%w: TLS asked for, and %s does not offer it", nats.ErrSecureConnWanted, u.Host)
	case info.TLSRequired:
		secure = true
	}
	if secure && !o.TLSHandshakeFirst && !skipTLS {
		if conn, err = p.tlsClient(conn, u); err != nil {
			return nil, nil, err
		}
		br = bufio.NewReaderSize(conn, 4096)
	}
	ci, err := p.connectInfo(u, info, secure)
	if err != nil {
		return nil, nil, err
	}
	js, _ := json.Marshal(ci)
	if _, err := conn.Write(append(append([]byte("CONNECT "), js...), "\r\nPING\r\n"...)); err != nil {
		return nil, nil, &causeError{ErrUnreachable, "writing to the server failed", err}
	}
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return nil, nil, &causeError{ErrUnreachable, "connecting", err}
		}
		switch protoOp(line) {
		case "PONG":
			_ = conn.SetDeadline(time.Time{})
			return &pubLink{conn: conn, maxPayload: info.MaxPayload, done: make(chan struct{})}, br, nil
		case "-ERR":
			return nil, nil, fmt.Errorf("nats: the server refused the store's publish connection: %s", bytes.TrimSpace(line[4:]))
		case "PING":
			if _, err := conn.Write([]byte("PONG\r\n")); err != nil {
				return nil, nil, &causeError{ErrUnreachable, "writing to the server failed", err}
			}
		}
	}
}

// tlsClient makes conn a TLS client connection with nc's TLS settings.
func (p *pubConn) tlsClient(conn net.Conn, u *url.URL) (net.Conn, error) {
	o := &p.nc.Opts
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.TLSConfig != nil {
		cfg = o.TLSConfig.Clone()
	}
	if o.TLSCertCB != nil {
		cert, err := o.TLSCertCB()
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if o.RootCAsCB != nil {
		pool, err := o.RootCAsCB()
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if cfg.ServerName == "" {
		cfg.ServerName = u.Hostname()
	}
	tc := tls.Client(conn, cfg)
	if err := tc.Handshake(); err != nil {
		return nil, fmt.Errorf("%w: %w", nats.ErrTLS, err)
	}
	return tc, nil
}

// connectInfo returns the CONNECT of nc's credentials: the URL's user and
// password or token, else the options' user, password, token, nkey, user
// JWT and the signature of the server's nonce.
func (p *pubConn) connectInfo(u *url.URL, info serverInfo, secure bool) (connectInfo, error) {
	o := &p.nc.Opts
	ci := connectInfo{TLS: secure, Name: o.Name, Lang: "go", Version: "inflight-natsjs", Protocol: 1,
		Echo: true, Headers: true, NoResponders: true}
	if u.User != nil {
		if pass, ok := u.User.Password(); ok {
			ci.User, ci.Pass = u.User.Username(), pass
		} else {
			ci.Token = u.User.Username()
		}
	} else {
		ci.User, ci.Pass, ci.Token, ci.Nkey = o.User, o.Password, o.Token, o.Nkey
		if o.UserInfo != nil {
			ci.User, ci.Pass = o.UserInfo()
		}
	}
	if o.UserJWT != nil {
		jwt, err := o.UserJWT()
		if err != nil {
			return ci, err
		}
		ci.JWT = jwt
	}
	if ci.JWT != "" || ci.Nkey != "" {
		if o.SignatureCB == nil {
			return ci, errors.New("nats: a user JWT or nkey without a signature callback")
		}
		sig, err := o.SignatureCB([]byte(info.Nonce))
		if err != nil {
			return ci, fmt.Errorf("nats: signing the server's nonce: %w", err)
		}
		ci.Sig = base64.RawURLEncoding.EncodeToString(sig)
	}
	if o.TokenHandler != nil {
		ci.Token = o.TokenHandler()
	}
	return ci, nil
}
