package core

import (
	"time"

	"github.com/inflightmq/inflight/wire"
)

// Message is what SendAsync sends: a payload and optional metadata, all
// stored with it by the broker under its Topic.
//
// Ownership: the producer keeps references to Payload, Key and the Headers
// slice with its values (it copies none of them) from SendAsync until the
// message's callback has returned, or Send has returned. The caller must not
// modify them until then; afterwards they are the caller's again.
//
// Limits, checked by SendAsync (ErrInvalidMessage, no callback): Key at most
// wire.MaxKeyLen bytes (4 KiB); at most wire.MaxHeaders headers (64), each
// with a key of 1 to wire.MaxHeaderKeyLen bytes (255) and a value of at most
// wire.MaxHeaderValueLen bytes (64 KiB); EventTime zero or within the years
// 1678 to 2262. The whole record (payload, key and headers) must fit one
// frame (ErrMessageTooLarge, see Producer.MaxMessageSize), and counts
// against MaxPendingBytes.
type Message struct {
	// Topic is the topic the message goes to; empty: the producer's Topic
	// option. A topic is 1 to 255 bytes of ASCII letters, digits, '.', '_'
	// and '-' (ErrInvalidMessage otherwise). One producer writes any
	// number of topics: sequence IDs, order and deduplication are per
	// (topic, producer name).
	Topic   string
	Payload []byte
	// Key is an optional record key, for example to route or partition.
	// nil or empty: none.
	Key []byte
	// Headers are optional ordered key/value pairs; keys may repeat.
	Headers []Header
	// EventTime is when the event happened, as the application says; the
	// zero Time means none. It is stored at nanosecond precision, without
	// its location or monotonic reading.
	EventTime time.Time
}

// Header is one key/value pair of a message's headers. It is wire.Header,
// so headers pass to the wire and the broker without a copy.
type Header = wire.Header

// MessageID identifies a stored message within its topic: its sequence ID,
// unique and increasing per (topic, producer name), so (Message.Topic,
// MessageID) identifies it for the producer's Name. Sequence IDs of a topic
// are assigned in SendAsync call order (for one goroutine); IDs of
// messages that failed may be skipped.
type MessageID uint64

// Callback receives the outcome of one message: err == nil and the message's
// ID once the broker stored it, or a non-nil error and a zero ID:
//   - ErrTimeout: the message's deadline passed first, SendTimeout's or
//     its context's (then errors.Is matches context.DeadlineExceeded too);
//     it names the last connection failure if the producer had no
//     connection (see ErrTimeout);
//   - the context's error (context.Canceled) when the context given to
//     SendAsync was canceled first;
//   - ErrClosed: Close's context ended first (see Close);
//   - ErrMessageTooLarge: larger than the connected broker accepts;
//   - ErrFenced: a newer instance of the producer's Name took it over (see
//     Access);
//   - a refusal that waiting cannot heal: ErrUnauthorized or
//     ErrProtocolVersion after MaxRefusals refused HELLOs in a row;
//     ErrUnauthorized at once for a topic the broker does not let this
//     identity write; ErrNameInUse with Access(Exclusive);
//   - ErrSequenceExhausted: no sequence ID is left for the topic under the
//     Name.
//
// The errors from the broker wrap its ERROR frame (errors.As finds a
// *wire.RemoteError). msg is the pointer given to SendAsync.
//
// Callbacks run one at a time on a goroutine owned by the producer (never on
// a transport goroutine, never under a lock). A slow callback delays later
// callbacks but not receipts, timeouts or Send. From a callback:
//   - Send returns by its message's deadline with its outcome;
//   - Close closes the producer; it waits for pending messages to resolve
//     (bounded by its ctx) but not for callbacks, which run after the
//     calling callback returns;
//   - Flush returns ErrInCallback at once (it would wait for itself);
//   - SendAsync, when the queue is full, waits until the message's
//     deadline, because only the callback goroutine makes room; TrySendAsync
//     never waits.
//
// A callback that panics, or ends its goroutine with runtime.Goexit (as
// t.FailNow does), is reported to the ErrorHandler (ErrCallbackPanic,
// ErrCallbackExit); every later callback still runs exactly once.
type Callback func(id MessageID, msg *Message, err error)
