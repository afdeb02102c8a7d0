package stdnet

import (
	"crypto/tls"
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

// ConnectTimeout bounds one connect attempt, TCP connect and TLS handshake
// together (default 5s); the context given to Dial can only shorten it,
// and shares itself among the addresses still to try (see NewDialer).
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
// cfg.ServerName is empty it is the host of the address being dialed, as
// given to NewDialer. For
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
