package endpoints

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/inflightmq/inflight/wire"
)

// Settings are what every dialer of a List has: transport/tcp and
// transport/stdnet set them through their DialOptions (ConnectTimeout,
// KeepAlive, MaxInboundFrame), which check values with the Set methods.
type Settings struct {
	// ConnectTimeout bounds one connect attempt (default 5s); a Dial's
	// context can only shorten it (see Dial).
	ConnectTimeout time.Duration
	// KeepAlive is the TCP keep-alive period (default 15s; negative: off).
	KeepAlive time.Duration
	// MaxFrame is the largest frame accepted from the broker (default
	// wire.DefaultMaxFrameSize).
	MaxFrame int
}

// DefaultSettings returns the defaults named on Settings.
func DefaultSettings() Settings {
	return Settings{ConnectTimeout: 5 * time.Second, KeepAlive: 15 * time.Second, MaxFrame: wire.DefaultMaxFrameSize}
}

// SetConnectTimeout sets ConnectTimeout to d, or returns why d is refused.
func (s *Settings) SetConnectTimeout(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("ConnectTimeout %v must be positive", d)
	}
	s.ConnectTimeout = d
	return nil
}

// SetMaxFrame sets MaxFrame to n, or returns why n is refused.
func (s *Settings) SetMaxFrame(n int) error {
	if n < wire.MinMaxFrameSize {
		return fmt.Errorf("MaxInboundFrame %d below %d", n, wire.MinMaxFrameSize)
	}
	s.MaxFrame = n
	return nil
}

// DialTCP connects to addr within ctx, with the keep-alive period.
func (s *Settings) DialTCP(ctx context.Context, addr string) (net.Conn, error) {
	nd := net.Dialer{KeepAlive: s.KeepAlive}
	return nd.DialContext(ctx, "tcp", addr)
}

// Configure is a dialer's NewDialer up to its own work: it parses addrs
// and applies opts in order to cfg (whose fields start at their defaults)
// with apply. Every error, for a bad address list, a nil option or a value
// an option refuses, wraps invalid (the dialer's ErrInvalidOption).
func Configure[C, O any](addrs string, cfg *C, opts []O, apply func(O, *C) error, invalid error) (*List, error) {
	list, err := Parse(addrs)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", invalid, err)
	}
	for _, o := range opts {
		if any(o) == nil {
			err = errors.New("nil DialOption")
		} else {
			err = apply(o, cfg)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", invalid, err)
		}
	}
	return list, nil
}
