package core

// Message is what SendAsync sends.
//
// Payload ownership: the producer keeps a reference to Payload (it does not
// copy it) from SendAsync until the message's callback has returned, or Send
// has returned. The caller must not modify the bytes until then; afterwards
// the buffer is the caller's again.
type Message struct {
	Payload []byte
}

// MessageID identifies a stored message: its sequence ID, unique and
// increasing per producer name. Sequence IDs are assigned in SendAsync call
// order (for one goroutine); IDs of messages that failed are skipped.
type MessageID uint64

// Callback receives the outcome of one message: err == nil and the message's
// ID once the broker stored it, or a non-nil error and a zero ID (ErrTimeout,
// ErrClosed, ErrMessageTooLarge, or the error of the context given to
// SendAsync). msg is the pointer given to SendAsync.
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
