package natsjs

import (
	"errors"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/inflightmq/inflight/store/natsjs/layout"
)

// Errors returned by this package, wrapped with %w and the detail.
var (
	// ErrInvalidConfig: a Config or StreamConfig field is out of range.
	ErrInvalidConfig = errors.New("inflight: natsjs: invalid configuration")
	// ErrBufferingConn: the nats.Conn would buffer publishes while
	// reconnecting (its ReconnectBufSize is not -1), behind the ring's back.
	ErrBufferingConn = errors.New("inflight: natsjs: nats connection buffers publishes while reconnecting; dial with natsjs.Connect or nats.ReconnectBufSize(-1)")
	// ErrStreamMismatch: the stream exists with a configuration the store
	// cannot use (subjects, retention, replicas, storage, atomic publish).
	ErrStreamMismatch = errors.New("inflight: natsjs: stream configuration does not fit")
	// ErrEmptyTopic: State or Append with an empty topic.
	ErrEmptyTopic = errors.New("inflight: natsjs: empty topic")
	// ErrInvalidName: a topic or producer name that cannot be subject
	// tokens (see CheckTopic, CheckProducer), refused by State, Fence and
	// Append, so a producer learns it when it starts or first writes the
	// topic.
	ErrInvalidName = errors.New("inflight: natsjs: name cannot be a NATS subject token")
	// ErrBadRecords: Append's records are not in strictly increasing
	// sequence order, or a sequence ID is 0.
	ErrBadRecords = errors.New("inflight: natsjs: records not in increasing sequence order")
	// ErrRecordTooLarge: one record does not fit in a message of the
	// server's max_payload.
	ErrRecordTooLarge = errors.New("inflight: natsjs: record larger than the server's max_payload")
	// ErrTailMoving: the subject's tail changed under every compare-and-set
	// of one Append (Config.MaxConflicts times): another writer keeps
	// writing for the same producer.
	ErrTailMoving = errors.New("inflight: natsjs: subject tail keeps moving")
	// ErrCorruptTail: the subject's last message has no valid
	// Inflight-Last-Seq header (something else wrote on the subject).
	ErrCorruptTail = errors.New("inflight: natsjs: last message of the subject is not an inflight message")
	// ErrPublish: the server refused a write, or the client could not make
	// it (timeout, disconnected): its fate is unknown and the next Append
	// re-reads the tail.
	ErrPublish = errors.New("inflight: natsjs: publish failed")
	// ErrRead: the subject's tail could not be read.
	ErrRead = errors.New("inflight: natsjs: reading the subject's tail failed")
	// ErrPrefix: a stream read under a prefix it does not capture
	// (CheckPrefix).
	ErrPrefix = errors.New("inflight: natsjs: stream does not hold this prefix")
	// ErrUnreachable is wrapped by ErrPublish and ErrRead when the NATS
	// connection is down (closed, reconnecting, no server): Cause words it.
	ErrUnreachable = errors.New("inflight: natsjs: NATS unreachable")
	// ErrNoAnswer is wrapped by ErrPublish and ErrRead when NATS is
	// connected but JetStream did not answer in time or at all (no
	// responders: the stream has no leader, or JetStream is off).
	ErrNoAnswer = errors.New("inflight: natsjs: JetStream not answering")
)

// causeError is a client error with the words that say what it means for
// the store ("NATS unreachable: nats: connection closed").
type causeError struct {
	kind error  // ErrUnreachable or ErrNoAnswer
	note string // what the client's error means, if its text does not say
	err  error
}

func (e *causeError) Error() string {
	s := strings.TrimPrefix(e.kind.Error(), "inflight: natsjs: ") + ": "
	if e.note != "" {
		return s + e.note + " (" + e.err.Error() + ")"
	}
	return s + e.err.Error()
}

func (e *causeError) Unwrap() []error { return []error{e.kind, e.err} }

// withCause wraps a NATS client error in the words of its cause (an error
// that is none of those, such as a server's refusal, is returned as it is).
func withCause(err error) error {
	var ce *causeError
	switch {
	case err == nil || errors.As(err, &ce):
		return err
	case errors.Is(err, nats.ErrReconnectBufExceeded), errors.Is(err, nats.ErrConnectionReconnecting):
		// The store's connection buffers nothing while it reconnects.
		return &causeError{ErrUnreachable, "connection lost, reconnecting", err}
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionDraining),
		errors.Is(err, nats.ErrNoServers), errors.Is(err, nats.ErrDisconnected), errors.Is(err, nats.ErrStaleConnection):
		return &causeError{ErrUnreachable, "", err}
	case errors.Is(err, nats.ErrNoResponders):
		return &causeError{ErrNoAnswer, "no stream leader, or JetStream is off", err}
	case errors.Is(err, nats.ErrTimeout):
		return &causeError{ErrNoAnswer, "", err}
	}
	return err
}

// Cause returns what an error of a Store says of NATS, in words: "NATS
// unreachable: connection lost, reconnecting (nats: outbound buffer limit
// exceeded)", "JetStream not answering: nats: timeout"; "" when it says
// neither.
func Cause(err error) string {
	var ce *causeError
	if errors.As(err, &ce) {
		return ce.Error()
	}
	return ""
}

// isSizeErr: errors Append returns as they are, not as ErrPublish.
func isSizeErr(err error) bool {
	return errors.Is(err, ErrRecordTooLarge) || errors.Is(err, layout.ErrEventTime)
}
