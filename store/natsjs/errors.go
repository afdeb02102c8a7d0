package natsjs

import (
	"errors"

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
)

// isSizeErr: errors Append returns as they are, not as ErrPublish.
func isSizeErr(err error) bool {
	return errors.Is(err, ErrRecordTooLarge) || errors.Is(err, layout.ErrEventTime)
}
