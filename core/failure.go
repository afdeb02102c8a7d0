package core

import (
	"context"
	"strings"

	"github.com/inflightmq/inflight/wire"
)

// Errors that wrap other errors keep their parts and compose their text
// from them, so that it reads once: of what they wrap they quote the
// reason (wire.Reason: the text less the package prefixes "inflight: ",
// "inflight/wire: ", "inflight/broker: " of each error in its tree), since
// the outer error's "inflight: " already says where it comes from.
// errors.Is and errors.As see every error wrapped.

// wrap returns outer wrapping inner: "<outer>: <inner's reason>".
func wrap(outer, inner error) error { return &wrapped{outer: outer, inner: inner} }

type wrapped struct{ outer, inner error }

func (e *wrapped) Error() string   { return e.outer.Error() + ": " + wire.Reason(e.inner) }
func (e *wrapped) Unwrap() []error { return []error{e.outer, e.inner} }

// brokerError is an ERROR (or TOPIC_ERROR) frame from the broker as the
// producer reports it: kind names it among this package's errors
// (ErrUnauthorized, ErrProtocolVersion, ErrFenced, ErrNameInUse; nil for
// other codes), remote is the frame. Its text gives the broker's reason
// once:
//
//	inflight: not authorized by the broker: certificate "eve" not in the access list
//
// where the frame alone reads "inflight/wire: remote error unauthorized:
// unauthorized: certificate ...": a broker sends its error's reason
// (wire.Reason), which begins with the code's name when the code only
// restates it; that name is left out.
type brokerError struct {
	kind   error
	remote *wire.RemoteError
}

func newBrokerError(e wire.Error) *brokerError {
	b := &brokerError{remote: &wire.RemoteError{Code: e.Code, Text: e.Text}}
	switch e.Code {
	case wire.CodeUnauthorized:
		b.kind = ErrUnauthorized
	case wire.CodeVersion:
		b.kind = ErrProtocolVersion
	case wire.CodeFenced:
		b.kind = ErrFenced
	case wire.CodeNameInUse:
		b.kind = ErrNameInUse
	}
	return b
}

func (e *brokerError) Error() string {
	code := e.remote.Code.String()
	text := strings.TrimPrefix(e.remote.Text, code+": ")
	var s string
	if e.kind != nil {
		s = e.kind.Error()
	} else {
		s = "inflight: broker error (" + code + ")"
	}
	if text != "" {
		s += ": " + text
	}
	return s
}

func (e *brokerError) Unwrap() []error {
	if e.kind == nil {
		return []error{e.remote}
	}
	return []error{e.kind, e.remote}
}

// final reports whether the refusal cannot heal without a change of
// configuration, on one side or the other: credentials or grants, the
// protocol version (see MaxRefusals).
func (e *brokerError) final() bool { return e.kind == ErrUnauthorized || e.kind == ErrProtocolVersion }

// withCause is a message's outcome (ErrTimeout, ErrClosed) while the
// producer had no connection, naming the last connection failure (its
// reason, as wrap quotes it):
//
//	inflight: send timed out; last connection failure: not authorized by the broker: ...
type withCause struct{ outcome, cause error }

func (e *withCause) Error() string {
	return e.outcome.Error() + "; last connection failure: " + wire.Reason(e.cause)
}
func (e *withCause) Unwrap() []error { return []error{e.outcome, e.cause} }

// connFailure is the last connection failure, kept while the producer has
// no connection that completed its handshake, with the outcomes that name
// it, made once for every message that gets one.
type connFailure struct {
	timeout  error // ErrTimeout and the cause
	deadline error // errDeadline and the cause
	closed   error // ErrClosed and the cause
}

func newConnFailure(cause error) *connFailure {
	return &connFailure{
		timeout:  &withCause{outcome: ErrTimeout, cause: cause},
		deadline: &withCause{outcome: errDeadline, cause: cause},
		closed:   &withCause{outcome: ErrClosed, cause: cause},
	}
}

// errDeadline is the outcome of a message whose context's deadline passed
// before the broker stored it: a timeout, as SendTimeout's, and the
// context's error (errors.Is matches ErrTimeout and
// context.DeadlineExceeded): "inflight: send timed out: context deadline
// exceeded".
var errDeadline = wrap(ErrTimeout, context.DeadlineExceeded)
