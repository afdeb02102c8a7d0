package mem

import "errors"

var (
	// ErrRefused is returned by Dial while RefuseDials is on.
	ErrRefused = errors.New("inflight/mem: dial refused (fault injected)")
	// ErrDropped is the reason given to Handler.OnClose for a connection
	// cut by DropConnections or DropAfterFrames.
	ErrDropped = errors.New("inflight/mem: connection dropped (fault injected)")
	// ErrDialerClosed is returned by Dial after Close, and given to OnClose
	// of the connections Close cut.
	ErrDialerClosed = errors.New("inflight/mem: dialer closed")
)
