package stdnet

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/inflightmq/inflight/transport/endpoints"
)

// DialOption configures a Dialer.
type DialOption interface{ applyDial(*dialConfig) error }

type dialOptionFunc func(*dialConfig) error

func (f dialOptionFunc) applyDial(c *dialConfig) error { return f(c) }

type dialConfig struct {
	endpoints.Settings
	writeQueue int
	tls        *tls.Config
}

func defaultDialConfig() dialConfig {
	return dialConfig{Settings: endpoints.DefaultSettings(), writeQueue: 1024}
}

// ConnectTimeout bounds one connect attempt, TCP connect and TLS handshake
// together (default 5s); the context given to Dial can only shorten it,
// and shares itself among the addresses still to try (see NewDialer).
func ConnectTimeout(d time.Duration) DialOption {
	return dialOptionFunc(func(c *dialConfig) error { return c.SetConnectTimeout(d) })
}

// KeepAlive sets the TCP keep-alive period (default 15s; negative turns it
// off). The producer's heartbeat detects dead peers much sooner.
func KeepAlive(d time.Duration) DialOption {
	return dialOptionFunc(func(c *dialConfig) error { c.KeepAlive = d; return nil })
}

// MaxInboundFrame sets the largest frame the Dialer accepts from the broker
// (default wire.DefaultMaxFrameSize). A broker only sends small frames.
func MaxInboundFrame(n int) DialOption {
	return dialOptionFunc(func(c *dialConfig) error { return c.SetMaxFrame(n) })
}

// WriteQueue bounds how many writes (WriteFrame and WriteFrames calls) a
// connection holds, handed over and not yet taken by its writer for the
// socket (default 1024). A producer never comes near it: its window is a
// few writes. A caller that hands over more closes the connection with
// ErrWriteBacklog rather than letting memory grow.
func WriteQueue(n int) DialOption {
	return dialOptionFunc(func(c *dialConfig) error {
		if n <= 0 {
			return fmt.Errorf("WriteQueue %d must be positive", n)
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
			return errors.New("nil ClientTLS config")
		}
		c.tls = cfg.Clone()
		if c.tls.MinVersion == 0 {
			c.tls.MinVersion = tls.VersionTLS13
		}
		return nil
	})
}
