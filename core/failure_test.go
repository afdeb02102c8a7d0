package core

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/inflightmq/inflight/wire"
)

// TestErrorsReadOnce: errors that wrap others name each package once, and
// errors.Is and errors.As still find every error wrapped. The broker's
// texts are what a broker sends: its errors' reasons (wire.Reason).
func TestErrorsReadOnce(t *testing.T) {
	refusal := newBrokerError(wire.Error{Code: wire.CodeUnauthorized,
		Text: `unauthorized: certificate "eve" not in the access list`})
	version := newBrokerError(wire.Error{Code: wire.CodeVersion,
		Text: "protocol violation: unsupported protocol version: peer speaks 3, want 2"})
	store := newBrokerError(wire.Error{Code: wire.CodeStore, Text: "store failed: disk on fire"})
	dialErr := fmt.Errorf("inflight/tcp: dial %s: %w", "127.0.0.1:1", errors.New("connect: connection refused"))
	bare := newBrokerError(wire.Error{Code: wire.ErrorCode(99)})
	cases := []struct {
		err  error
		text string
		is   []error
	}{
		{refusal, `inflight: not authorized by the broker: certificate "eve" not in the access list`, []error{ErrUnauthorized}},
		{version, "inflight: protocol version refused by the broker: protocol violation: unsupported protocol version: peer speaks 3, want 2", []error{ErrProtocolVersion}},
		{store, "inflight: broker error (store): store failed: disk on fire", nil},
		{bare, "inflight: broker error (ErrorCode(99))", nil},
		{wrap(ErrHandshake, refusal), `inflight: handshake failed: not authorized by the broker: certificate "eve" not in the access list`, []error{ErrHandshake, ErrUnauthorized}},
		{newConnFailure(wrap(ErrHandshake, refusal)).timeout,
			`inflight: send timed out; last connection failure: handshake failed: not authorized by the broker: certificate "eve" not in the access list`,
			[]error{ErrTimeout, ErrHandshake, ErrUnauthorized}},
		{newConnFailure(wrap(errDial, errors.New("dial tcp 127.0.0.1:1: connect: connection refused"))).closed,
			"inflight: producer closed; last connection failure: dial failed: dial tcp 127.0.0.1:1: connect: connection refused",
			[]error{ErrClosed, errDial}},
		{wrap(ErrProtocol, fmt.Errorf("bad RECEIPT: %w", wire.ErrTruncated)), "inflight: protocol violation by broker: bad RECEIPT: truncated frame",
			[]error{ErrProtocol, wire.ErrTruncated}},
		// A deadline of the message's context is a timeout too, and names
		// the cause the same way.
		{errDeadline, "inflight: send timed out: context deadline exceeded", []error{ErrTimeout, context.DeadlineExceeded}},
		{newConnFailure(wrap(errConnLost, wrap(ErrProtocol, wire.ErrChecksum))).deadline,
			"inflight: send timed out: context deadline exceeded; last connection failure: connection lost: protocol violation by broker: batch checksum mismatch",
			[]error{ErrTimeout, context.DeadlineExceeded, errConnLost, ErrProtocol, wire.ErrChecksum}},
		// Words quoted from elsewhere stay as they are; only the prefixes
		// the errors of the tree begin with go.
		{newConnFailure(wrap(errDial, dialErr)).timeout,
			"inflight: send timed out; last connection failure: dial failed: dial 127.0.0.1:1: connect: connection refused",
			[]error{ErrTimeout, errDial}},
		{wrap(ErrHandshake, newBrokerError(wire.Error{Code: wire.CodeStore, Text: `store failed: subject "inflight: x" full`})),
			`inflight: handshake failed: broker error (store): store failed: subject "inflight: x" full`, []error{ErrHandshake}},
	}
	for _, c := range cases {
		if got := c.err.Error(); got != c.text {
			t.Errorf("text\n got %s\nwant %s", got, c.text)
		}
		for _, target := range c.is {
			if !errors.Is(c.err, target) {
				t.Errorf("%v: errors.Is(%v) is false", c.err, target)
			}
		}
		var re *wire.RemoteError
		if _, remote := c.err.(*brokerError); remote && !errors.As(c.err, &re) {
			t.Errorf("%v: errors.As(*wire.RemoteError) is false", c.err)
		}
	}
	if !refusal.final() || !version.final() || store.final() || bare.final() {
		t.Error("only unauthorized and version refusals are final")
	}
}
