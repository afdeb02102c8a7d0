package stdnet

import "errors"

var (
	// ErrInvalidOption is returned by NewDialer for an option
	// out of range, wrapped with its name.
	ErrInvalidOption = errors.New("inflight/stdnet: invalid option")
	// ErrDialerClosed is returned by Dial after Dialer.Close.
	ErrDialerClosed = errors.New("inflight/stdnet: dialer closed")
	// ErrHandshake wraps a failed TLS handshake: Dial returns it (with the
	// crypto/tls or crypto/x509 error, which says why: expired, unknown
	// authority, wrong host).
	ErrHandshake = errors.New("inflight/stdnet: TLS handshake failed")
	// ErrWriteBacklog is the reason a client connection closes when more
	// frames than WriteQueue wait to be written: the caller did not bound
	// what it hands over (a producer's window always does).
	ErrWriteBacklog = errors.New("inflight/stdnet: too many frames waiting to be written")
)
