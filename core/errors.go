package core

import "errors"

var (
	// ErrClosed is returned by SendAsync, TrySendAsync and Send once Close
	// has begun, and passed to the callback of every message that Close
	// failed because its context ran out before the message was stored.
	// In a callback (and from Send) it names the last connection failure
	// when the producer had no connection (see ErrTimeout).
	ErrClosed = errors.New("inflight: producer closed")
	// ErrTimeout is passed to the callback of a message whose deadline
	// passed before the broker acknowledged it, and returned by SendAsync,
	// Send and SendBatch when the queue stayed full until the message's
	// deadline. A deadline is a deadline, whichever set it: SendTimeout, or
	// the deadline of the context given to SendAsync, for which errors.Is
	// also matches context.DeadlineExceeded ("inflight: send timed out:
	// context deadline exceeded"). When the producer had no connection at
	// that moment, the error also wraps the last connection failure and
	// says so ("inflight: send timed out; last connection failure: ..."):
	// errors.Is matches ErrTimeout and that cause (ErrUnauthorized,
	// ErrHandshake, a *wire.RemoteError, the Dialer's error).
	ErrTimeout = errors.New("inflight: send timed out")
	// ErrQueueFull is returned by TrySendAsync, and by SendAsync when
	// BlockIfFull is false, when MaxPending messages or MaxPendingBytes are
	// already pending.
	ErrQueueFull = errors.New("inflight: send queue full")
	// ErrMessageTooLarge is returned by SendAsync for a message (payload and
	// metadata) larger than the largest record a frame can carry, and passed
	// to the callback of a message larger than what the connected broker
	// accepts.
	ErrMessageTooLarge = errors.New("inflight: message too large")
	// ErrInvalidMessage is returned by SendAsync, TrySendAsync and Send,
	// wrapped with the reason, for a message whose key, headers or event
	// time are over a limit (see Message).
	ErrInvalidMessage = errors.New("inflight: invalid message")
	// ErrNilMessage, ErrNilCallback and ErrNilContext are returned by
	// SendAsync, TrySendAsync and Send for a nil argument.
	ErrNilMessage  = errors.New("inflight: nil message")
	ErrNilCallback = errors.New("inflight: nil callback")
	ErrNilContext  = errors.New("inflight: nil context")
	// ErrInvalidOption is returned by New, wrapped with the option's name
	// and value, for an option out of range or a nil Dialer.
	ErrInvalidOption = errors.New("inflight: invalid option")
	// ErrHandshake is reported to the ErrorHandler when a connection did
	// not complete its HELLO in time or the broker answered wrongly; the
	// producer closes that connection and dials again.
	ErrHandshake = errors.New("inflight: handshake failed")
	// ErrSequenceConflict is reported to the ErrorHandler when the broker
	// holds sequence IDs for this producer's name that this producer never
	// sent: another producer uses the same name. The producer keeps
	// redialing and does not report those messages as stored.
	ErrSequenceConflict = errors.New("inflight: broker has sequence IDs this producer never sent (producer name in use?)")
	// ErrUnauthorized is reported to the ErrorHandler (wrapped in
	// ErrHandshake), wrapping the broker's ERROR (a *wire.RemoteError of
	// code wire.CodeUnauthorized), when the broker refused the HELLO: its
	// token or certificate was not accepted, the identity may not write
	// this topic under this producer name, or a live producer of another
	// identity holds the name. Its text gives the broker's reason once:
	// "inflight: not authorized by the broker: <reason>". The producer keeps
	// redialing with backoff; after MaxRefusals such refusals in a row it
	// passes the error to the callback of every pending message (see
	// MaxRefusals), and a message that times out meanwhile names it.
	ErrUnauthorized = errors.New("inflight: not authorized by the broker")
	// ErrProtocolVersion is like ErrUnauthorized (and counted with it by
	// MaxRefusals) for a broker that refused the HELLO's protocol version
	// (an ERROR of code wire.CodeVersion): the producer and the broker need
	// versions of inflight that speak one protocol.
	ErrProtocolVersion = errors.New("inflight: protocol version refused by the broker")
	// ErrFenced is passed to the callback of every message pending when a
	// newer Producer instance with the same Name (and Topic) took the name
	// over, and returned by SendAsync, TrySendAsync, Send and SendBatch
	// from then on (until Close, after which they return ErrClosed). The
	// producer dials no more: it is done. A message that was written and
	// fails with it may have been stored (its receipt lost the race with the
	// takeover); one that was never written was not. The error wraps the
	// broker's ERROR (a *wire.RemoteError of code wire.CodeFenced) and reads
	// "inflight: producer fenced by a newer instance of its name: ...".
	// With Access(WaitForName) the producer is not done: see WaitForName.
	ErrFenced = errors.New("inflight: producer fenced by a newer instance of its name")
	// ErrNameInUse is reported to the ErrorHandler (wrapped in
	// ErrHandshake), with Access(WaitForName) or Access(Exclusive), when
	// the broker refused the HELLO because a live producer holds the name;
	// the producer redials with backoff. With Exclusive it is also passed to
	// the callback of every message pending at each such refusal. It wraps
	// the broker's ERROR (code wire.CodeNameInUse).
	ErrNameInUse = errors.New("inflight: producer name in use by a live producer")
	// ErrSequenceExhausted is passed to the callback of every pending
	// message of a topic when the broker's last stored sequence ID for
	// (topic, Name) is wire.MaxSeq, or the producer reached it: no sequence
	// ID is left for the topic under that name, and the producer never
	// wraps around to reuse one. The other topics go on; use another Name
	// for this topic.
	ErrSequenceExhausted = errors.New("inflight: no sequence ID left for this producer name")
	// ErrHeartbeat is reported to the ErrorHandler when the broker sent
	// nothing on a connection for twice the Heartbeat interval, not even a
	// PONG to the producer's PINGs (only the producer sends PINGs); the
	// producer closes it and dials again.
	ErrHeartbeat = errors.New("inflight: connection silent past heartbeat timeout")
	// ErrProtocol is reported to the ErrorHandler when the broker sent a
	// frame that breaks the protocol; the producer closes that connection.
	ErrProtocol = errors.New("inflight: protocol violation by broker")
	// ErrCallbackPanic is reported to the ErrorHandler, wrapping the
	// panic's value, when a callback panics. The dispatcher recovers and
	// goes on with the next callback.
	ErrCallbackPanic = errors.New("inflight: callback panicked")
	// ErrCallbackExit is reported to the ErrorHandler when a callback ended
	// its goroutine with runtime.Goexit (as t.FailNow and testify's require
	// do). A new callback goroutine carries on with the next callback.
	ErrCallbackExit = errors.New("inflight: callback called runtime.Goexit")
	// ErrRecordsLost is reported to the ErrorHandler when, at a topic's
	// first use on a new connection (its TOPIC_OK), the broker's last
	// stored sequence ID for the topic and this producer is below what it
	// had already acknowledged: it lost acknowledged records (a file
	// store repaired to a side file, a memory store restarted, a stale
	// replica). The producer goes on; the lost records are not resent.
	ErrRecordsLost = errors.New("inflight: broker lost records it had acknowledged")
	// ErrInCallback is returned by Flush called from a callback: it would
	// wait for the callback that called it.
	ErrInCallback = errors.New("inflight: Flush called from a callback would wait for itself")
)
