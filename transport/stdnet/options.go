package stdnet

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"time"

	"github.com/inflightmq/inflight/wire"
)

// DialOption configures a Dialer.
type DialOption interface{ applyDial(*dialConfig) error }

type dialOptionFunc func(*dialConfig) error

func (f dialOptionFunc) applyDial(c *dialConfig) error { return f(c) }

type dialConfig struct {
	connectTimeout time.Duration
	keepAlive      time.Duration
	maxFrame       int
	writeQueue     int
	tls            *tls.Config
}

func defaultDialConfig() dialConfig {
	return dialConfig{connectTimeout: 5 * time.Second, keepAlive: 15 * time.Second,
		maxFrame: wire.DefaultMaxFrameSize, writeQueue: 1024}
}

// ConnectTimeout bounds the TCP connect and the TLS handshake of one Dial
// (default 5s each); the context given to Dial can only shorten them.
func ConnectTimeout(d time.Duration) DialOption {
	return dialOptionFunc(func(c *dialConfig) error {
		if d <= 0 {
			return fmt.Errorf("%w: ConnectTimeout %v must be positive", ErrInvalidOption, d)
		}
		c.connectTimeout = d
		return nil
	})
}

// KeepAlive sets the TCP keep-alive period (default 15s; negative turns it
// off). The producer's heartbeat detects dead peers much sooner.
func KeepAlive(d time.Duration) DialOption {
	return dialOptionFunc(func(c *dialConfig) error { c.keepAlive = d; return nil })
}

// MaxInboundFrame sets the largest frame the Dialer accepts from the broker
// (default wire.DefaultMaxFrameSize). A broker only sends small frames.
func MaxInboundFrame(n int) DialOption {
	return dialOptionFunc(func(c *dialConfig) error {
		if n < wire.MinMaxFrameSize {
			return fmt.Errorf("%w: MaxInboundFrame %d below %d", ErrInvalidOption, n, wire.MinMaxFrameSize)
		}
		c.maxFrame = n
		return nil
	})
}

// WriteQueue bounds how many frames a connection holds, handed to
// WriteFrame and not yet written to the socket (default 1024). A producer
// never comes near it: its window is a few frames. A caller that hands over
// more closes the connection with ErrWriteBacklog rather than letting memory
// grow.
func WriteQueue(n int) DialOption {
	return dialOptionFunc(func(c *dialConfig) error {
		if n <= 0 {
			return fmt.Errorf("%w: WriteQueue %d must be positive", ErrInvalidOption, n)
		}
		c.writeQueue = n
		return nil
	})
}

// ClientTLS makes the Dialer speak TLS with cfg (default: plain TCP). The
// Dialer uses a clone. If cfg.MinVersion is zero it is TLS 1.3; if
// cfg.ServerName is empty it is the host of the Dialer's address. For
// mutual TLS put the client's certificate in cfg.Certificates.
func ClientTLS(cfg *tls.Config) DialOption {
	return dialOptionFunc(func(c *dialConfig) error {
		if cfg == nil {
			return fmt.Errorf("%w: nil ClientTLS config", ErrInvalidOption)
		}
		c.tls = cfg.Clone()
		if c.tls.MinVersion == 0 {
			c.tls.MinVersion = tls.VersionTLS13
		}
		return nil
	})
}

// ServerOption configures a Server.
type ServerOption interface{ applyServer(*serverConfig) error }

type serverOptionFunc func(*serverConfig) error

func (f serverOptionFunc) applyServer(c *serverConfig) error { return f(c) }

type serverConfig struct {
	maxConns     int
	readTimeout  time.Duration
	idleTimeout  time.Duration
	writeTimeout time.Duration
	handshake    time.Duration
	tls          *tls.Config
	clientCAs    *x509.CertPool
}

func defaultServerConfig() serverConfig {
	return serverConfig{maxConns: 10000, readTimeout: 10 * time.Second, idleTimeout: time.Minute,
		writeTimeout: 10 * time.Second, handshake: 10 * time.Second}
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
// bytes arrived (default 10s): a sender that trickles (slowloris) gets an
// ERROR frame and is closed.
func ReadTimeout(d time.Duration) ServerOption {
	return durationOption("ReadTimeout", d, func(c *serverConfig) { c.readTimeout = d })
}

// IdleTimeout closes a connection that sent nothing for d (default 60s).
// Producers send a PING after a heartbeat interval of silence, so a live
// producer is never idle that long.
func IdleTimeout(d time.Duration) ServerOption {
	return durationOption("IdleTimeout", d, func(c *serverConfig) { c.idleTimeout = d })
}

// HandshakeTimeout bounds a TLS handshake, from accept to its end (default
// 10s); a client slower than that is closed. It also bounds the handshake
// that carries a MaxConns refusal.
func HandshakeTimeout(d time.Duration) ServerOption {
	return durationOption("HandshakeTimeout", d, func(c *serverConfig) { c.handshake = d })
}

// WriteTimeout bounds one write of replies to a producer (default 10s): a
// producer that stops reading its receipts is closed.
func WriteTimeout(d time.Duration) ServerOption {
	return durationOption("WriteTimeout", d, func(c *serverConfig) { c.writeTimeout = d })
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

// ServerTLS makes the Server speak TLS with cfg (default: plain TCP). The
// Server uses a clone. If cfg.MinVersion is zero it is TLS 1.3. cfg needs a
// certificate: with exactly one in cfg.Certificates (and no GetCertificate
// or GetConfigForClient of its own) the Server can swap it while running,
// see Server.ReloadCertificate.
func ServerTLS(cfg *tls.Config) ServerOption {
	return serverOptionFunc(func(c *serverConfig) error {
		if cfg == nil {
			return fmt.Errorf("%w: nil ServerTLS config", ErrInvalidOption)
		}
		if len(cfg.Certificates) == 0 && cfg.GetCertificate == nil && cfg.GetConfigForClient == nil {
			return fmt.Errorf("%w: ServerTLS config without a certificate", ErrInvalidOption)
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
// (tls.RequireAndVerifyClientCert). It needs ServerTLS.
func RequireClientCert(pool *x509.CertPool) ServerOption {
	return serverOptionFunc(func(c *serverConfig) error {
		if pool == nil {
			return fmt.Errorf("%w: nil RequireClientCert pool", ErrInvalidOption)
		}
		c.clientCAs = pool
		return nil
	})
}
