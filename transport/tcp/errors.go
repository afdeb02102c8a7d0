package tcp

import "errors"

var (
	// ErrInvalidOption is returned by NewDialer for an option
	// out of range, wrapped with its name.
	ErrInvalidOption = errors.New("inflight/tcp: invalid option")
	// ErrDialerClosed is returned by Dial after Dialer.Close.
	ErrDialerClosed = errors.New("inflight/tcp: dialer closed")
)
