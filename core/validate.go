package core

import (
	"fmt"

	"github.com/inflightmq/inflight/wire"
)

// validate checks msg against the limits documented on Message and returns
// the size it counts against MaxPendingBytes and the frame limit: the
// payload plus the bytes its metadata takes on the wire (0 without any, and
// at least 1 with any, so the size exceeds len(msg.Payload) exactly when msg
// has metadata: ledger.nextBatch relies on it to copy a plain record without
// reading msg).
// Errors wrap ErrInvalidMessage or ErrMessageTooLarge. It runs in SendAsync
// on the caller's goroutine; it does not allocate unless it fails.
func (c *config) validate(msg *Message) (int, error) {
	size := len(msg.Payload)
	if len(msg.Key) != 0 || len(msg.Headers) != 0 || !msg.EventTime.IsZero() {
		meta, err := wire.CheckMeta(msg.Key, msg.Headers, msg.EventTime)
		if err != nil {
			return 0, fmt.Errorf("%w: %w", ErrInvalidMessage, err)
		}
		size += meta
	}
	if size > c.maxMessageSize() {
		return 0, fmt.Errorf("%w: %d bytes with its metadata, limit %d", ErrMessageTooLarge, size, c.maxMessageSize())
	}
	return size, nil
}
