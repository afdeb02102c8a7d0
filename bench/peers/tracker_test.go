package peers

import (
	"fmt"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inflightmq/inflight/metrics/hist"
)

// ringBits sizes the table of send times: message i keeps its send time in
// slot i mod 2^ringBits until its acknowledgement reads it. That is safe as
// long as a client never has more than 2^ringBits messages unacknowledged;
// the largest window used here is kgo's 50000 buffered records, and the
// sender checks the margin as it goes.
const ringBits = 18

// tracker measures one run. The sender calls sending(i) before handing
// message i to the client; the client's acknowledgement path calls ack with
// the system's own sequence number of the message (inflight's MessageID,
// the JetStream stream sequence, the Kafka offset plus one), which is
// contiguous for one producer on a fresh stream or partition. The message's
// index is that number minus the last warm-up one.
//
// ack and fail run on the client's callback goroutine: each of the clients
// here runs its callbacks one at a time (inflight's dispatcher, the
// JetStream reply subscription, kgo's serial promises), so the histogram
// takes no lock.
type tracker struct {
	sampleMask uint64 // time message i if i&sampleMask == 0
	start      time.Time
	sentAt     []int64 // ns since start, per ring slot

	base    atomic.Uint64 // sequence number of the last warm-up message
	lastSeq atomic.Uint64 // last warm-up sequence number acknowledged
	done    atomic.Uint64 // timed messages acknowledged
	warm    atomic.Uint64 // warm-up messages acknowledged
	failed  atomic.Uint64

	lat hist.Histogram // ack goroutine only, until wait has returned

	errMu    sync.Mutex
	firstErr error
}

// newTracker returns a tracker that times every sample-th message; sample is
// rounded up to a power of two, which spares the callback a division.
func newTracker(sample int) *tracker {
	mask := uint64(1)<<bits.Len(uint(max(sample, 1)-1)) - 1
	t := &tracker{sampleMask: mask, sentAt: make([]int64, 1<<ringBits)}
	t.base.Store(math.MaxUint64) // everything is warm-up until arm
	return t
}

// arm ends the warm-up: the acknowledgements that follow are timed. It must
// be called after every warm-up message was acknowledged, before the first
// timed send.
func (t *tracker) arm() {
	t.base.Store(t.lastSeq.Load())
	t.start = time.Now()
}

// sending notes the send time of message i (0-based, after arm).
func (t *tracker) sending(i uint64) error {
	if i&t.sampleMask == 0 {
		atomic.StoreInt64(&t.sentAt[i&(1<<ringBits-1)], int64(time.Since(t.start)))
	}
	if i&1023 == 0 && i-t.done.Load() > 1<<(ringBits-1) {
		return fmt.Errorf("%d messages unacknowledged: more than the tracker's ring allows", i-t.done.Load())
	}
	return nil
}

// ack records the acknowledgement of the message with sequence number seq.
func (t *tracker) ack(seq uint64) {
	base := t.base.Load()
	if seq <= base {
		t.lastSeq.Store(seq)
		t.warm.Add(1)
		return
	}
	if i := seq - base - 1; i&t.sampleMask == 0 {
		at := atomic.LoadInt64(&t.sentAt[i&(1<<ringBits-1)])
		t.lat.Record(time.Since(t.start) - time.Duration(at))
	}
	t.done.Add(1)
}

// fail records a message that will never be acknowledged.
func (t *tracker) fail(err error) {
	t.errMu.Lock()
	if t.firstErr == nil {
		t.firstErr = err
	}
	t.errMu.Unlock()
	t.failed.Add(1)
}

// err returns the first failure, if any.
func (t *tracker) err() error {
	t.errMu.Lock()
	defer t.errMu.Unlock()
	if t.firstErr != nil {
		return fmt.Errorf("%d messages failed, the first with: %w", t.failed.Load(), t.firstErr)
	}
	return nil
}

// wait waits until n messages counted by counter have been acknowledged or
// any failed. Clients report "everything acknowledged" slightly before
// their last callback has returned, hence this second wait.
func (t *tracker) wait(counter *atomic.Uint64, n uint64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for counter.Load() < n {
		if err := t.err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d messages acknowledged after %v", counter.Load(), n, limit)
		}
		time.Sleep(20 * time.Microsecond)
	}
	return t.err()
}
