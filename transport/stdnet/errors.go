package stdnet

import "errors"

var (
	// ErrInvalidOption is returned by NewDialer and NewServer for an option
	// out of range, wrapped with its name.
	ErrInvalidOption = errors.New("inflight/stdnet: invalid option")
	// ErrDialerClosed is returned by Dial after Dialer.Close.
	ErrDialerClosed = errors.New("inflight/stdnet: dialer closed")
	// ErrHandshake wraps a failed TLS handshake: Dial returns it (with the
	// crypto/tls or crypto/x509 error, which says why: expired, unknown
	// authority, wrong host), and a Server counts it.
	ErrHandshake = errors.New("inflight/stdnet: TLS handshake failed")
	// ErrNoTLS is returned by Server.ReloadCertificate on a server without
	// TLS, or whose tls.Config brings its own GetCertificate.
	ErrNoTLS = errors.New("inflight/stdnet: server has no reloadable certificate")
	// ErrWriteBacklog is the reason a client connection closes when more
	// frames than WriteQueue wait to be written: the caller did not bound
	// what it hands over (a producer's window always does).
	ErrWriteBacklog = errors.New("inflight/stdnet: too many frames waiting to be written")
	// ErrReadTimeout is the reason a Server closes a connection that left a
	// frame incomplete for longer than ReadTimeout (a slowloris sender).
	ErrReadTimeout = errors.New("inflight/stdnet: frame not completed in time")
	// ErrIdle is the reason a Server closes a connection silent for longer
	// than IdleTimeout.
	ErrIdle = errors.New("inflight/stdnet: connection idle")
	// ErrTooManyConns is the reason a Server refuses a connection beyond
	// MaxConns.
	ErrTooManyConns = errors.New("inflight/stdnet: too many connections")
)
