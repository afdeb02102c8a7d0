package tcp

import "errors"

var (
	// ErrInvalidOption is returned by NewDialer and NewServer for an option
	// out of range, wrapped with its name.
	ErrInvalidOption = errors.New("inflight/tcp: invalid option")
	// ErrDialerClosed is returned by Dial after Dialer.Close.
	ErrDialerClosed = errors.New("inflight/tcp: dialer closed")
	// ErrReadTimeout is the reason a Server closes a connection that left a
	// frame incomplete for longer than ReadTimeout (a slowloris sender).
	ErrReadTimeout = errors.New("inflight/tcp: frame not completed in time")
	// ErrIdle is the reason a Server closes a connection silent for longer
	// than IdleTimeout.
	ErrIdle = errors.New("inflight/tcp: connection idle")
	// ErrTooManyConns is the reason a Server refuses a connection beyond
	// MaxConns.
	ErrTooManyConns = errors.New("inflight/tcp: too many connections")
)
