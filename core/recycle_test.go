package core

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/ringbuf"
	"github.com/inflightmq/inflight/wire"
)

// TestSweeperBesideRecycledPages: the sweeper reads a pending position's
// deadline while the receipts and the dispatcher acknowledge and release
// it; in a ring that holds few positions, its page then leaves the page
// table (ringbuf recycles it), and a second lookup of its slot found no
// page: the sweeper's goroutine panicked (a nil page), at once under the
// race detector. One goroutine plays sender, pump, receipts and
// dispatcher, in pages of 16; another sweeps without pause, for half a
// second.
func TestSweeperBesideRecycledPages(t *testing.T) {
	l, _, err := newTestLedger(64, 1<<20, ledgerTimeout, nil, false)
	require.NoError(t, err)
	_, err = l.handshake(0, true)
	require.NoError(t, err)
	const far = math.MaxInt64 / 2 // no deadline passes
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			from, _ := l.bounds()
			l.expireInOrder(from, 0)
		}
	})
	msgs := make([]*Message, 16)
	for i := range msgs {
		msgs[i] = &Message{Payload: []byte("x")}
	}
	sizes := make([]int64, 16)
	for i := range sizes {
		sizes[i] = 1
	}
	cb := func(MessageID, *Message, error) {}
	var bb wire.BatchBuilder
	lim := batchLimits{messages: 1000, bytes: 1 << 20, frame: wire.DefaultMaxFrameSize, end: math.MaxUint64}
	var pos, next uint64
	deliver := func(uint64, ringbuf.State) {}
	end := time.Now().Add(500 * time.Millisecond)
	for round := 0; time.Now().Before(end); round++ {
		first, n, _, err := l.claim(context.Background(), sizes, far, false, nil, nil)
		require.NoError(t, err)
		l.publish(first, msgs[:n], cb, nil, far, nil)
		for pos < first+uint64(n) {
			pos, _, _ = l.nextBatch(&bb, pos, lim, 0)
		}
		l.ackThrough(l.seq(pos - 1))
		l.walk(&next, deliver)
	}
	stop.Store(true)
	wg.Wait()
	head, tail := l.bounds()
	require.Equal(t, tail, head, "everything released")
	require.Zero(t, l.ring.Bytes())
}
