package peers

import (
	"testing"
	"time"

	"github.com/inflightmq/inflight/bench/peers/internal/workload"
)

// TestPeers runs every system briefly: each message is acknowledged once,
// with the sequence numbers the tracker expects.
func TestPeers(t *testing.T) {
	const n = 5000
	for _, sys := range systems {
		t.Run(sys.name, func(t *testing.T) {
			payload := workload.Payload(100)
			tr := newTracker(1)
			c := sys.open(t, tr)
			sendAll(t, c, tr, payload, n)
			time.Sleep(10 * time.Millisecond) // nothing more may arrive
			if got := tr.done.Load(); got != n {
				t.Errorf("%d acknowledgements, want %d", got, n)
			}
			if got := tr.lat.Count(); got != n {
				t.Errorf("%d latencies, want %d", got, n)
			}
			// Every index mapped back to its own send time: a wrong base
			// would read unwritten slots (latency = time since start).
			if p := tr.lat.Quantile(1); p > 2*time.Second {
				t.Errorf("largest latency %v", p)
			}
		})
	}
}

func TestTrackerSampling(t *testing.T) {
	for sample, want := range map[int]uint64{0: 0, 1: 0, 2: 1, 3: 3, 16: 15, 17: 31} {
		if got := newTracker(sample).sampleMask; got != want {
			t.Errorf("sample %d: mask %d, want %d", sample, got, want)
		}
	}
	tr := newTracker(4)
	tr.ack(7) // warm-up
	tr.arm()
	for i := range uint64(10) {
		if err := tr.sending(i); err != nil {
			t.Fatal(err)
		}
	}
	for seq := uint64(8); seq < 18; seq++ {
		tr.ack(seq)
	}
	if tr.done.Load() != 10 || tr.warm.Load() != 1 || tr.lat.Count() != 3 { // i = 0, 4, 8
		t.Errorf("done %d warm %d timed %d, want 10 1 3", tr.done.Load(), tr.warm.Load(), tr.lat.Count())
	}
}

// sendAll warms c up, then sends payload n times through it as the tracker's
// messages 0 to n-1 and waits until every one is acknowledged; it fails t on
// any error.
func sendAll(t *testing.T, c client, tr *tracker, payload []byte, n uint64) {
	t.Helper()
	if err := warm(c, tr, [][]byte{payload}); err != nil {
		t.Fatal(err)
	}
	tr.arm()
	for i := range n {
		if err := tr.sending(i); err != nil {
			t.Fatal(err)
		}
		if err := c.send(0, payload); err != nil {
			t.Fatal(err)
		}
	}
	if err := drain(c, tr, n); err != nil {
		t.Fatal(err)
	}
}
