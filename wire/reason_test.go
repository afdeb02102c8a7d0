package wire_test

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/inflightmq/inflight/wire"
)

// TestReason: the reason leaves out the package prefix each error of the
// tree begins with, and keeps every other word, also words that look like
// a prefix in text an error quotes.
func TestReason(t *testing.T) {
	protocol := errors.New("inflight/broker: protocol violation")
	store := errors.New("inflight/broker: store failed")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{io.EOF, "EOF"},
		{wire.ErrVersion, "unsupported protocol version"},
		{fmt.Errorf("%w: %w: peer speaks 3, want 4", protocol, wire.ErrVersion), "protocol violation: unsupported protocol version: peer speaks 3, want 4"},
		{fmt.Errorf("%w: disk full: %w", store, io.ErrShortWrite), "store failed: disk full: short write"},
		{fmt.Errorf("inflight/file: open %s: %w", "/tmp/x", io.EOF), "open /tmp/x: EOF"},
		{fmt.Errorf("inflight: natsjs: producer %q: %w", "p", errors.New("inflight/broker: fenced")), `natsjs: producer "p": fenced`},
		{fmt.Errorf("%w: peer said %q", protocol, "inflight: x: y"), `protocol violation: peer said "inflight: x: y"`},
		{fmt.Errorf("%w: %v", protocol, wire.ErrVersion), "protocol violation: inflight/wire: unsupported protocol version"},
		{errors.Join(protocol, wire.ErrVersion), "protocol violation\nunsupported protocol version"},
		{errors.New("inflight/not a package: x"), "inflight/not a package: x"},
		{errors.New("inflightx: y"), "inflightx: y"},
	} {
		if got := wire.Reason(tc.err); got != tc.want {
			t.Errorf("Reason(%q)\n got %q\nwant %q", tc.err, got, tc.want)
		}
	}
}
