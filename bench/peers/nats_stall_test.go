package peers

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inflightmq/inflight/bench/peers/internal/workload"
)

// TestNATSStall fills a small JetStream window with 1 KiB messages and a
// stall wait far shorter than an acknowledgement takes, so that
// PublishAsync gives up with ErrTooManyStalledMsgs over and over: send must
// wait those stalls out, and every message must be acknowledged once.
func TestNATSStall(t *testing.T) {
	const n = 2000
	tr := newTracker(1)
	c := openNATSWindow(t, tr, 4)
	c.opts = []jetstream.PublishOpt{jetstream.WithStallWait(time.Microsecond)}
	payload := workload.Payload(1024)
	sendAll(t, c, tr, payload, n)
	if c.stalls == 0 {
		t.Error("no stall: the test did not exercise the wait")
	}
	if got := tr.failed.Load(); got != 0 {
		t.Errorf("%d failures", got)
	}
	if got := tr.done.Load(); got != n {
		t.Errorf("%d acknowledgements, want %d", got, n)
	}
}
