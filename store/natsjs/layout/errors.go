package layout

import "errors"

// ErrMalformed is returned (wrapped, with the reason) for a message or packed
// body that is not in a layout this package knows.
var ErrMalformed = errors.New("inflight: natsjs/layout: malformed message")

// ErrEventTime is returned by SetRecordHeaders for an event time outside the
// years 0-9999, which RFC 3339 cannot write.
var ErrEventTime = errors.New("inflight: natsjs/layout: event time outside years 0-9999")
