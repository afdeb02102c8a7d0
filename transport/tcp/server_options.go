package tcp

import (
	"fmt"
	"time"
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
