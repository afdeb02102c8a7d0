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
	// MaxConns, when every open connection is past its HELLO.
	ErrTooManyConns = errors.New("inflight/server: too many connections")
	// ErrTooManyPending is the reason a Server closes a connection that has
	// not sent its HELLO yet to make room for a newer one (MaxPendingConns,
	// MaxConns).
	ErrTooManyPending = errors.New("inflight/server: too many connections without a HELLO")
	// ErrHandshakeTimeout is the reason a Server closes a connection that did
	// not complete its TLS handshake and send its HELLO within
	// HandshakeTimeout of being accepted.
	ErrHandshakeTimeout = errors.New("inflight/server: no HELLO within the handshake timeout")
	// ErrTLSHandshake is the reason a Server closes a connection whose TLS
	// handshake failed; it is wrapped with the TLS error (a missing, expired
	// or unknown client certificate, an alert from the client).
	ErrTLSHandshake = errors.New("inflight/server: TLS handshake failed")
	// ErrNotTLS is the reason a TLS Server closes a connection whose first
	// bytes are not TLS (a producer without TLS). It tells the client so in
	// a plain ERROR frame.
	ErrNotTLS = errors.New("inflight/server: the server expects TLS")
)
