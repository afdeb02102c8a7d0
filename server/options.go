package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"time"
)

// Option configures a Server. Options are made by the functions below and
// checked by New, which returns ErrInvalidOption for a value out of range.
type Option interface{ apply(*serverConfig) error }

type optionFunc func(*serverConfig) error

func (f optionFunc) apply(c *serverConfig) error { return f(c) }

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
func MaxConns(n int) Option {
	return optionFunc(func(c *serverConfig) error {
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
func ReadTimeout(d time.Duration) Option {
	return durationOption("ReadTimeout", d, func(c *serverConfig) { c.readTimeout = d })
}

// IdleTimeout closes a connection that sent nothing for d (default 60s).
// Producers send a PING after a heartbeat interval of silence, so a live
// producer is never idle that long.
func IdleTimeout(d time.Duration) Option {
	return durationOption("IdleTimeout", d, func(c *serverConfig) { c.idleTimeout = d })
}

// HandshakeTimeout bounds a TLS handshake, from accept to its end (default
// 10s); a client slower than that is closed. It also bounds the handshake
// that carries a MaxConns refusal.
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
