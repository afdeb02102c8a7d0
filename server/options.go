package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"time"
)

// Option configures a Server. Options are made by the functions below and
// checked by New, which returns ErrInvalidOption for a value out of range.
type Option interface{ apply(*serverConfig) error }

type optionFunc func(*serverConfig) error

func (f optionFunc) apply(c *serverConfig) error { return f(c) }

type serverConfig struct {
	maxConns     int
	maxPending   int
	readTimeout  time.Duration
	idleTimeout  time.Duration
	writeTimeout time.Duration
	handshake    time.Duration
	tls          *tls.Config
	clientCAs    *x509.CertPool
	onRefused    func(Refusal)
}

// Defaults of the options below.
const (
	DefaultMaxConns         = 10000
	DefaultMaxPendingConns  = 256
	DefaultHandshakeTimeout = 5 * time.Second
)

func defaultServerConfig() serverConfig {
	return serverConfig{maxConns: DefaultMaxConns, maxPending: DefaultMaxPendingConns,
		readTimeout: 10 * time.Second, idleTimeout: time.Minute,
		writeTimeout: 10 * time.Second, handshake: DefaultHandshakeTimeout}
}

// MaxConns limits open connections, pending ones (see MaxPendingConns)
// included (default DefaultMaxConns). A new connection that finds the limit
// reached takes the place of the oldest pending connection, which is closed
// (ErrTooManyPending); if there is none, every open connection is past its
// HELLO and the new one gets an ERROR frame and is closed (ErrTooManyConns).
// So connections that never send a HELLO cannot keep producers out.
func MaxConns(n int) Option {
	return optionFunc(func(c *serverConfig) error {
		if n <= 0 {
			return fmt.Errorf("%w: MaxConns %d must be positive", ErrInvalidOption, n)
		}
		c.maxConns = n
		return nil
	})
}

// MaxPendingConns limits the pending connections: those accepted that have
// not sent a complete HELLO frame yet (default DefaultMaxPendingConns). They
// count against MaxConns too. A new connection that finds n pending takes
// the place of the oldest, which is closed with an ERROR frame
// (ErrTooManyPending) rather than the new one refused: a flood of
// connections that never authenticate holds at most n connections, each for
// at most HandshakeTimeout, and a producer that connects meanwhile and sends
// its HELLO at once is served.
func MaxPendingConns(n int) Option {
	return optionFunc(func(c *serverConfig) error {
		if n <= 0 {
			return fmt.Errorf("%w: MaxPendingConns %d must be positive", ErrInvalidOption, n)
		}
		c.maxPending = n
		return nil
	})
}

// Refusal describes a connection the Server refused, or closed before its
// HELLO, for a reason of its own (see OnRefused). A connection refused by
// the broker (an unauthorized HELLO) is reported by broker.OnRefused.
type Refusal struct {
	Addr net.Addr // the client's address
	// Err says why: it wraps ErrTooManyConns, ErrTooManyPending,
	// ErrHandshakeTimeout, ErrNotTLS, or ErrTLSHandshake and the TLS error.
	Err error
}

// OnRefused sets a function the Server calls once for every connection it
// refuses or closes before its HELLO (see Refusal), for logging (default:
// none; Stats counts them either way). fn runs on the Server's accept
// goroutine or on the connection's, and must not block: a flood of
// refusals calls it at the rate of the flood.
func OnRefused(fn func(Refusal)) Option {
	return optionFunc(func(c *serverConfig) error {
		c.onRefused = fn
		return nil
	})
}

// ReadTimeout bounds how long a frame may stay incomplete once its first
// bytes arrived (default 10s): a sender that trickles (slowloris) gets an
// ERROR frame and is closed.
func ReadTimeout(d time.Duration) Option {
	return durationOption("ReadTimeout", d, func(c *serverConfig) { c.readTimeout = d })
}

// IdleTimeout closes a connection that sent nothing for d (default 60s),
// before or after its HELLO. Producers send a PING after a heartbeat
// interval of silence, so a live producer is never idle that long; a PING
// counts only after an accepted HELLO.
func IdleTimeout(d time.Duration) Option {
	return durationOption("IdleTimeout", d, func(c *serverConfig) { c.idleTimeout = d })
}

// HandshakeTimeout bounds the time from accepting a connection to
// reading its HELLO frame, the TLS handshake included (default
// DefaultHandshakeTimeout): a client slower than that gets an ERROR frame
// and is closed (ErrHandshakeTimeout). Before its HELLO a connection may
// send nothing else (a PING is refused: see broker.Session.Handle), so
// nothing but a HELLO keeps it open. IdleTimeout and ReadTimeout apply
// before the HELLO too, when they end sooner. It also bounds the TLS
// handshake that carries a MaxConns refusal.
func HandshakeTimeout(d time.Duration) Option {
	return durationOption("HandshakeTimeout", d, func(c *serverConfig) { c.handshake = d })
}

// WriteTimeout bounds one write of replies to a producer (default 10s): a
// producer that stops reading its receipts is closed.
func WriteTimeout(d time.Duration) Option {
	return durationOption("WriteTimeout", d, func(c *serverConfig) { c.writeTimeout = d })
}

// durationOption validates a positive duration before set stores it.
func durationOption(name string, d time.Duration, set func(*serverConfig)) Option {
	return optionFunc(func(c *serverConfig) error {
		if d <= 0 {
			return fmt.Errorf("%w: %s %v must be positive", ErrInvalidOption, name, d)
		}
		set(c)
		return nil
	})
}

// TLS makes the Server speak TLS with cfg (default: plain TCP). The
// Server uses a clone. If cfg.MinVersion is zero it is TLS 1.3. cfg needs a
// certificate: with exactly one in cfg.Certificates (and no GetCertificate
// or GetConfigForClient of its own) the Server can swap it while running,
// see Server.ReloadCertificate.
func TLS(cfg *tls.Config) Option {
	return optionFunc(func(c *serverConfig) error {
		if cfg == nil {
			return fmt.Errorf("%w: nil TLS config", ErrInvalidOption)
		}
		if len(cfg.Certificates) == 0 && cfg.GetCertificate == nil && cfg.GetConfigForClient == nil {
			return fmt.Errorf("%w: TLS config without a certificate", ErrInvalidOption)
		}
		c.tls = cfg.Clone()
		if c.tls.MinVersion == 0 {
			c.tls.MinVersion = tls.VersionTLS13
		}
		return nil
	})
}

// RequireClientCert turns on mutual TLS: a client must present a
// certificate that pool verifies, or its handshake fails
// (tls.RequireAndVerifyClientCert). It needs TLS.
func RequireClientCert(pool *x509.CertPool) Option {
	return optionFunc(func(c *serverConfig) error {
		if pool == nil {
			return fmt.Errorf("%w: nil RequireClientCert pool", ErrInvalidOption)
		}
		c.clientCAs = pool
		return nil
	})
}
