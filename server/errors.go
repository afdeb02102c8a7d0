package server

import "errors"

var (
	// ErrInvalidOption is returned by New for an option out of range,
	// wrapped with its name.
	ErrInvalidOption = errors.New("inflight/server: invalid option")
	// ErrNoTLS is returned by Server.ReloadCertificate on a server without
	// TLS, or whose tls.Config brings its own GetCertificate.
	ErrNoTLS = errors.New("inflight/server: server has no reloadable certificate")
	// ErrReadTimeout is the reason a Server closes a connection that left a
	// frame incomplete for longer than ReadTimeout (a slowloris sender).
	ErrReadTimeout = errors.New("inflight/server: frame not completed in time")
	// ErrIdle is the reason a Server closes a connection silent for longer
	// than IdleTimeout.
	ErrIdle = errors.New("inflight/server: connection idle")
	// ErrTooManyConns is the reason a Server refuses a connection beyond
	// MaxConns.
	ErrTooManyConns = errors.New("inflight/server: too many connections")
)
