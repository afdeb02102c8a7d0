package mem

import "errors"

var (
	// ErrRefused is returned by Dial while RefuseDials is on.
	ErrRefused = errors.New("inflight/mem: dial refused (fault injected)")
	// ErrDropped is the reason given to Handler.OnClose for a connection
	// cut by DropConnections or DropAfterFrames.
	ErrDropped = errors.New("inflight/mem: connection dropped (fault injected)")
	// ErrClosedByBroker is the reason given to Handler.OnClose when the
	// serving side closed the connection: another connection took over its
	// producer name, or the store failed (the producer got an ERROR frame
	// first).
	ErrClosedByBroker = errors.New("inflight/mem: connection closed by the broker")
	// ErrDialerClosed is returned by Dial after Close, and given to OnClose
	// of the connections Close cut.
	ErrDialerClosed = errors.New("inflight/mem: dialer closed")
)
