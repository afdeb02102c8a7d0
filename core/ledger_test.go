package core

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/ringbuf"
	"github.com/inflightmq/inflight/wire"
)

// The ledger alone: no transport, no goroutines but the test's, time as a
// number the test moves (the ledger's deadlines are exact off the system
// clock).

const ledgerTimeout = 100

// ledgerRig drives one ledger and records what the dispatcher would have
// reported.
type ledgerRig struct {
	t         *testing.T
	l         *ledger
	wake      chan struct{} // the dispatcher's wake-up
	bb        wire.BatchBuilder
	next      uint64 // the dispatcher's walk cursor
	fails     []uint64
	delivered map[uint64]ringbuf.State
	order     []uint64 // positions delivered by the in-order walk, in order
}

func newLedgerRig(t *testing.T, maxPending int) *ledgerRig {
	return newLedgerRigBytes(t, maxPending, 1<<20)
}

// newLedgerRigBytes is newLedgerRig with a byte budget of maxBytes.
func newLedgerRigBytes(t *testing.T, maxPending int, maxBytes int64) *ledgerRig {
	l, wake, err := newTestLedger(maxPending, maxBytes, ledgerTimeout, nil, false)
	require.NoError(t, err)
	_, err = l.handshake(0, true) // fixes seqBase
	require.NoError(t, err)
	return &ledgerRig{t: t, l: l, wake: wake, delivered: map[uint64]ringbuf.State{}}
}

// frameRecords decodes the records of a BATCH frame, payloads copied.
func frameRecords(t *testing.T, frame []byte) []wire.Record {
	t.Helper()
	b, err := wire.DecodeBatch(frame)
	require.NoError(t, err)
	it, err := b.Records()
	require.NoError(t, err)
	var rr wire.RecordReader
	var out []wire.Record
	for rec, ok := it.NextRecord(&rr); ok; rec, ok = it.NextRecord(&rr) {
		rec.Payload = slices.Clone(rec.Payload)
		out = append(out, rec)
	}
	require.NoError(t, it.Err())
	return out
}

// claim claims one position for size bytes without waiting.
func (r *ledgerRig) claim(size int) (uint64, error) {
	pos, _, _, err := r.l.claim(context.Background(), []int64{int64(size)}, 0, false, nil, nil)
	return pos, err
}

// send enqueues one message of size bytes at time now without waiting.
func (r *ledgerRig) send(ctx context.Context, size int, now int64, w *waiter) (uint64, error) {
	pos, err := r.claim(size)
	if err != nil {
		return 0, err
	}
	msg := &Message{Payload: make([]byte, size)}
	var cb Callback = func(MessageID, *Message, error) {}
	if w != nil {
		cb = nil
	}
	var cctx context.Context
	if ctx.Done() != nil {
		cctx = ctx
	}
	r.l.publish(pos, []*Message{msg}, cb, cctx, now+ledgerTimeout, w)
	return pos, nil
}

func (r *ledgerRig) write(from uint64, frame int, now int64) (uint64, int) {
	next, n, _ := r.l.nextBatch(&r.bb, from, batchLimits{messages: 1000, bytes: 1 << 20, frame: frame, end: math.MaxUint64}, now)
	return next, n
}

func (r *ledgerRig) deliver(pos uint64, st ringbuf.State) {
	if prev, ok := r.delivered[pos]; ok {
		r.t.Fatalf("position %d delivered twice (%v, then %v)", pos, prev, st)
	}
	r.delivered[pos] = st
}

func (r *ledgerRig) dispatch() {
	r.fails = r.l.takeFails(nil)
	r.l.deliverFails(&r.fails, r.next, r.deliver)
	r.l.walk(&r.next, func(pos uint64, st ringbuf.State) {
		r.order = append(r.order, pos)
		r.deliver(pos, st)
	})
}

func (r *ledgerRig) state(pos uint64) ringbuf.State { return r.l.ring.State(pos) }

// waitSettled waits until the context.AfterFunc of pos (its own goroutine)
// has queued it as a failure.
func (r *ledgerRig) waitSettled(pos uint64) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.l.failMu.Lock()
		queued := slices.Contains(r.l.fails, pos)
		r.l.failMu.Unlock()
		if queued {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("position %d: cancel not settled", pos)
		}
		runtime.Gosched()
	}
}

func TestLedgerTransitions(t *testing.T) {
	t.Run("WriteAckDeliver", func(t *testing.T) {
		r := newLedgerRig(t, 8)
		for range 3 {
			_, err := r.send(context.Background(), 10, 0, nil)
			require.NoError(t, err)
		}
		assert.Equal(t, uint64(1), r.l.seq(0))
		next, n := r.write(0, wire.DefaultMaxFrameSize, 0)
		assert.Equal(t, uint64(3), next)
		assert.Equal(t, 3, n)
		assert.Equal(t, 3, r.l.unackedNow())
		assert.Equal(t, uint64(1), r.bb.FirstSeq())
		for pos := range uint64(3) {
			assert.Equal(t, ringbuf.Written, r.state(pos))
		}

		r.l.ackThrough(2) // seqs 1 and 2: positions 0 and 1
		assert.Equal(t, ringbuf.Acked, r.state(1))
		assert.Equal(t, ringbuf.Written, r.state(2))
		assert.Equal(t, 1, r.l.unackedNow())
		assert.Equal(t, uint64(2), r.l.ring.Acked())
		select {
		case <-r.wake:
		default:
			t.Fatal("an ack wakes the dispatcher")
		}
		r.dispatch()
		assert.Equal(t, []uint64{0, 1}, r.order)
		head, tail := r.l.bounds()
		assert.Equal(t, uint64(2), head, "delivered positions are released")
		assert.Equal(t, uint64(3), tail)

		r.l.ackThrough(99) // beyond what was written: only what was written
		assert.Equal(t, uint64(3), r.l.ring.Acked())
		assert.Zero(t, r.l.unackedNow())
	})

	t.Run("ExpireOutOfOrder", func(t *testing.T) {
		r := newLedgerRig(t, 8)
		_, _ = r.send(context.Background(), 1, 0, nil)  // written, never acked
		_, _ = r.send(context.Background(), 1, 50, nil) // later deadline
		r.write(0, wire.DefaultMaxFrameSize, 0)

		from, next, _ := r.l.expireDue(0, ledgerTimeout-1, nil)
		assert.Equal(t, int64(ledgerTimeout), next, "next look at the first deadline")
		assert.Equal(t, uint64(0), from)
		assert.Equal(t, ringbuf.Written, r.state(0), "never early")

		from, next, _ = r.l.expireDue(from, ledgerTimeout, nil)
		assert.Equal(t, ringbuf.Expired, r.state(0))
		assert.Equal(t, ringbuf.Written, r.state(1))
		assert.LessOrEqual(t, from, uint64(1), "every position below from is resolved")
		assert.Equal(t, int64(50+ledgerTimeout), next)
		assert.Equal(t, 1, r.l.unackedNow(), "an expired written message is no longer unacked")

		r.dispatch()
		assert.Equal(t, ringbuf.Expired, r.delivered[0])
		assert.Empty(t, r.order, "delivered from the failure queue, marked Done, walked silently")
		head, _ := r.l.bounds()
		assert.Equal(t, uint64(1), head)
	})

	t.Run("NotWrittenOnceExpiredOrCanceled", func(t *testing.T) {
		r := newLedgerRig(t, 8)
		ctx, cancel := context.WithCancel(context.Background())
		_, _ = r.send(context.Background(), 1, 0, nil)
		_, _ = r.send(ctx, 1, 1000, nil)
		cancel()
		// The AfterFunc may not have run yet: the writer checks ctx itself.
		next, n := r.write(0, wire.DefaultMaxFrameSize, ledgerTimeout)
		assert.Zero(t, n, "neither is written")
		assert.Equal(t, uint64(2), next)
		assert.Equal(t, ringbuf.Expired, r.state(0))
		assert.Equal(t, ringbuf.Canceled, r.state(1))
		assert.Zero(t, r.l.unackedNow())
		r.dispatch()
		assert.Len(t, r.delivered, 2)
	})

	t.Run("WrittenInRuns", func(t *testing.T) {
		// nextBatch takes up to writeRun positions into Writing before it
		// copies them: batches that end inside a run, at a byte limit or at
		// a message that expired, hold exactly the records before it, in
		// order, metadata included.
		r := newLedgerRig(t, 256)
		const keyed, late, total = 45, 3*writeRun + 5, 4*writeRun + 10
		for i := range total {
			msg := &Message{Payload: make([]byte, 1+i%50)}
			msg.Payload[0] = byte(i)
			size := len(msg.Payload)
			if i == keyed {
				msg.Key = []byte("key")
				meta, err := wire.CheckMeta(msg.Key, nil, time.Time{})
				require.NoError(t, err)
				size += meta
			}
			pos, err := r.claim(size)
			require.NoError(t, err)
			sent := int64(50)
			if i == late {
				sent = 0 // expires before the others
			}
			r.l.publish(pos, []*Message{msg}, func(MessageID, *Message, error) {}, nil, sent+ledgerTimeout, nil)
		}
		records := func() []wire.Record { return frameRecords(t, r.bb.Finish()) }
		check := func(from uint64, recs []wire.Record) {
			t.Helper()
			assert.Equal(t, r.l.seq(from), r.bb.FirstSeq())
			for i, rec := range recs {
				pos := int(from) + i
				assert.Equal(t, 1+pos%50, len(rec.Payload), "position %d", pos)
				assert.Equal(t, byte(pos), rec.Payload[0], "position %d", pos)
				if pos == keyed {
					assert.Equal(t, []byte("key"), rec.Key)
				} else {
					assert.Nil(t, rec.Key, "position %d", pos)
				}
				assert.Equal(t, ringbuf.Written, r.state(uint64(pos)))
			}
		}

		// A byte limit inside the second run.
		limit := wire.BatchHeaderSize
		for i := range writeRun + 7 {
			limit += wire.RecordOverhead(1+i%50) + 1 + i%50
		}
		next, n, closedAt := r.l.nextBatch(&r.bb, 0, batchLimits{messages: 1000, bytes: limit, frame: wire.DefaultMaxFrameSize, end: math.MaxUint64}, 120)
		assert.Equal(t, limit, closedAt, "the byte limit closed the frame")
		assert.Equal(t, writeRun+7, n)
		assert.Equal(t, uint64(writeRun+7), next)
		assert.Equal(t, ringbuf.Pending, r.state(next), "the first one past the limit is left as it was")
		check(0, records())

		// Across the keyed message, up to the one that expired.
		from := next
		next, n = r.write(from, wire.DefaultMaxFrameSize, 120)
		assert.Equal(t, late-int(from), n)
		assert.Equal(t, uint64(late+1), next, "the expired one is resolved, not written")
		assert.Equal(t, ringbuf.Expired, r.state(late))
		check(from, records())

		// The rest, in runs, to the last published position.
		from = next
		next, n = r.write(from, wire.DefaultMaxFrameSize, 120)
		assert.Equal(t, total-int(from), n)
		assert.Equal(t, uint64(total), next)
		check(from, records())
		assert.Equal(t, total-1, r.l.unackedNow())
	})

	t.Run("RejectedInOrder", func(t *testing.T) {
		r := newLedgerRig(t, 8)
		_, _ = r.send(context.Background(), 10, 0, nil)
		_, _ = r.send(context.Background(), 5000, 0, nil) // over a 4 KiB frame
		_, _ = r.send(context.Background(), 10, 0, nil)
		next, n := r.write(0, 4096, 0)
		assert.Equal(t, 1, n, "a batch stops at a gap")
		assert.Equal(t, uint64(1), next)
		next, n = r.write(next, 4096, 0)
		assert.Equal(t, 1, n, "the rejected one is skipped, the next written")
		assert.Equal(t, uint64(3), next)
		assert.Equal(t, ringbuf.Rejected, r.state(1))
		assert.Empty(t, r.l.takeFails(nil), "Rejected is not an out-of-order failure")
		r.dispatch()
		assert.Empty(t, r.order, "nothing before the rejected message is resolved yet")
		r.l.ackThrough(r.l.seq(2))
		r.dispatch()
		assert.Equal(t, []uint64{0, 1, 2}, r.order)
		assert.Equal(t, ringbuf.Rejected, r.delivered[1])
	})

	t.Run("ResendAndHandshake", func(t *testing.T) {
		r := newLedgerRig(t, 8)
		for range 4 {
			_, _ = r.send(context.Background(), 1, 0, nil)
		}
		r.write(0, wire.DefaultMaxFrameSize, 0)
		r.l.ackThrough(1)
		assert.Equal(t, uint64(1), r.l.resendFrom())
		// The connection died; the broker stored up to seq 3 meanwhile.
		lost, err := r.l.handshake(3, false)
		require.NoError(t, err)
		require.NoError(t, lost)
		assert.Equal(t, uint64(3), r.l.resendFrom())
		assert.Equal(t, ringbuf.Acked, r.state(2))
		next, n := r.write(r.l.resendFrom(), wire.DefaultMaxFrameSize, 0)
		assert.Equal(t, 1, n, "only the unacknowledged one is resent")
		assert.Equal(t, uint64(4), next)
		assert.Equal(t, 1, r.l.unackedNow(), "a resend is not counted twice")
		_, err = r.l.handshake(99, false)
		assert.ErrorIs(t, err, ErrSequenceConflict)
		lost, err = r.l.handshake(1, false)
		assert.NoError(t, err, "the connection goes on")
		assert.ErrorIs(t, lost, ErrRecordsLost, "the broker is below the 3 it acknowledged")
	})

	t.Run("SendNotifiedAtResolution", func(t *testing.T) {
		r := newLedgerRig(t, 8)
		w := &waiter{ch: make(chan ringbuf.State, 1)}
		pos, err := r.send(context.Background(), 1, 0, w)
		require.NoError(t, err)
		r.write(0, wire.DefaultMaxFrameSize, 0)
		r.l.ackThrough(r.l.seq(pos))
		select {
		case st := <-w.ch:
			assert.Equal(t, ringbuf.Acked, st)
		default:
			t.Fatal("Send not notified when its message resolved")
		}
		r.dispatch() // no callback; released
		head, _ := r.l.bounds()
		assert.Equal(t, uint64(1), head)
	})

	t.Run("RoomAfterTheDeadline", func(t *testing.T) {
		// A sender waiting for room whose deadline passes as room comes
		// gets ErrTimeout, and nothing is queued for it.
		r := newLedgerRig(t, 1)
		first, err := r.send(context.Background(), 1, 0, nil)
		require.NoError(t, err)
		var now atomic.Int64
		now.Store(10)
		armed := make(chan struct{})
		never := make(chan time.Time) // the sender's timer: only room can wake it
		got := make(chan error, 1)
		go func() {
			_, _, _, err := r.l.claim(context.Background(), []int64{1}, 10+ledgerTimeout, true, now.Load,
				func(d time.Duration) (<-chan time.Time, func() bool) {
					assert.Equal(t, time.Duration(ledgerTimeout), d)
					close(armed)
					return never, func() bool { return true }
				})
			got <- err
		}()
		<-armed
		_, n := r.write(first, 1<<20, 10) // the first message, within its own deadline
		require.Equal(t, 1, n)
		now.Store(10 + ledgerTimeout) // the waiting sender's deadline
		r.l.ackThrough(r.l.seq(first))
		r.dispatch() // releases the slot: room
		select {
		case err := <-got:
			assert.ErrorIs(t, err, ErrTimeout)
		case <-time.After(5 * time.Second):
			t.Fatal("the sender never woke up")
		}
		_, tail := r.l.bounds()
		assert.Equal(t, first+1, tail, "nothing was claimed for the late sender")
	})

	t.Run("CloseFailsTheRest", func(t *testing.T) {
		r := newLedgerRig(t, 4)
		for range 4 {
			_, _ = r.send(context.Background(), 1, 0, nil)
		}
		_, err := r.send(context.Background(), 1, 0, nil)
		assert.ErrorIs(t, err, ErrQueueFull)
		r.l.close()
		_, err = r.send(context.Background(), 1, 0, nil)
		assert.ErrorIs(t, err, ErrClosed)
		_, tail := r.l.bounds()
		assert.False(t, r.l.resolvedBelow(tail))
		r.l.failBelow(tail, ringbuf.Closed)
		assert.True(t, r.l.resolvedBelow(tail))
		r.dispatch()
		for pos := range uint64(4) {
			assert.Equal(t, ringbuf.Closed, r.delivered[pos])
		}
		head, _ := r.l.bounds()
		assert.Equal(t, tail, head)
	})
}

// TestLedgerRandomOperations applies random operations (enqueue, write,
// receipts, expiry, cancel, reconnect, dispatch, close) and checks the
// ledger's invariants against a simple model after each one.
func TestLedgerRandomOperations(t *testing.T) {
	closedBy := map[bool]int{} // frames closed by a byte bound: the cached one (true) or the limit
	for seed := range uint64(300) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { ledgerProperty(t, seed, closedBy) })
	}
	if !t.Failed() {
		// Closes at the cached bound are rare here (64 records of
		// pending positions): TestCachedFramesRandomSizes makes them.
		assert.NotZero(t, closedBy[false], "frames closed at the limit")
	}
}

func ledgerProperty(t *testing.T, seed uint64, closedBy map[bool]int) {
	rng := rand.New(rand.NewPCG(seed, 42))
	r := newLedgerRig(t, 1<<rng.IntN(9)+1) // up to 257: batches span writeRuns, and reach minCachedRecords
	var now int64
	var writer uint64 // the pump's position on the current connection
	cancels := map[uint64]context.CancelFunc{}
	written := map[uint64]bool{} // handed to a connection at least once
	brokerLast := uint64(0)      // highest seq the broker stored
	closed := false

	check := func(op string) {
		t.Helper()
		l := r.l
		head, tail := l.bounds()
		acked, maxW := l.ring.Acked(), l.maxWritten.Load()
		require.LessOrEqual(t, head, tail, op)
		require.LessOrEqual(t, acked, maxW, "%s: acked <= maxWritten", op)
		require.LessOrEqual(t, maxW, tail, "%s: maxWritten <= tail", op)
		unacked := 0
		for pos := head; pos < tail; pos++ {
			st := l.ring.State(pos)
			if pos < acked {
				require.True(t, st.Final(), "%s: position %d below acked is %v", op, pos, st)
			}
			if st == ringbuf.Written {
				unacked++
			}
			if st == ringbuf.Acked {
				require.True(t, written[pos], "%s: position %d acked but never written", op, pos)
			}
		}
		require.Equal(t, unacked, l.unackedNow(), "%s: unacked counts Written positions", op)
		// Successes and rejections come in position order.
		for i := 1; i < len(r.order); i++ {
			require.Less(t, r.order[i-1], r.order[i], "%s: in-order deliveries", op)
		}
	}

	for step := range 400 {
		switch op := rng.IntN(9); op {
		case 0, 1: // enqueue
			if closed {
				continue
			}
			ctx := context.Background()
			var cancel context.CancelFunc
			if rng.IntN(4) == 0 {
				ctx, cancel = context.WithCancel(ctx)
			}
			size := rng.IntN(100)
			if rng.IntN(30) == 0 {
				size = 5000 // rejected by a 4 KiB connection
			}
			pos, err := r.send(ctx, size, now, nil)
			if err != nil {
				require.ErrorIs(t, err, ErrQueueFull)
				if cancel != nil {
					cancel()
				}
				continue
			}
			if cancel != nil {
				cancels[pos] = cancel
			}
			check("enqueue")
		case 2: // the pump writes a batch
			from := max(writer, r.l.resendFrom())
			lim := batchLimits{messages: 1 + rng.IntN(8), bytes: 1 << 20, frame: 4096, end: math.MaxUint64, sum: rng.IntN(2) == 0}
			if rng.IntN(2) == 0 {
				lim.messages, lim.bytes = 1+rng.IntN(3*writeRun), 64+rng.IntN(4096)
			}
			if rng.IntN(2) == 0 {
				// A cached bound small enough for these frames to meet
				// it with minCachedRecords to maxCachedRecords.
				lim.messages, lim.cached = 3*minCachedRecords, 2048+rng.IntN(2048)
			}
			next, n, closedAt := r.l.nextBatch(&r.bb, from, lim, now)
			// A valid frame, its CRC taken after each run or at once
			// (TestCachedFramesRandomSizes sums frames of many runs too).
			if n > 0 {
				if b, err := wire.DecodeBatch(r.bb.Finish()); err != nil || int(b.Count) != n {
					t.Fatalf("step %d: a frame of %d records (sum %v): %d records, %v", step, n, lim.sum, b.Count, err)
				}
			}
			if closedAt > 0 {
				// Closed by a byte bound: the next record is there and
				// would not have fit; the cached bound only with
				// minCachedRecords to maxCachedRecords in the frame.
				size := int(r.l.ring.Slot(next).Size())
				limit := min(lim.bytes, lim.frame)
				cached := lim.cached > 0 && closedAt == min(limit, lim.cached) && closedAt < limit
				if closedAt != limit && !cached || cached && (n < minCachedRecords || n > maxCachedRecords) ||
					n == 0 || r.l.ring.State(next).Final() || r.bb.Size()+wire.RecordOverhead(size)+size <= closedAt || n > 1 && r.bb.Size() > closedAt {
					t.Fatalf("step %d: a frame of %d records (%d bytes) reported closed at %d bytes (limit %d, cached %d), the next record of %d bytes",
						step, n, r.bb.Size(), closedAt, limit, lim.cached, size)
				}
				closedBy[cached]++
			}
			for pos := next - uint64(n); pos < next; pos++ {
				written[pos] = true
			}
			writer = next
			check("write")
		case 3: // the broker stores some of what was written and answers
			if maxW := r.l.maxWritten.Load(); maxW > 0 {
				upto := r.l.seq(uint64(rng.Uint64N(maxW)))
				// The broker stores written, unresolved-or-acked records in
				// order; a receipt covers only what it stored.
				brokerLast = max(brokerLast, upto)
				r.l.ackThrough(upto)
			}
			check("receipt")
		case 4: // time passes; the sweeper runs
			now += int64(rng.IntN(ledgerTimeout))
			r.l.expireDue(0, now, nil)
			check("sweep")
			head, tail := r.l.bounds()
			for pos := head; pos < tail; pos++ {
				if st := r.l.ring.State(pos); !st.Final() && r.l.ring.Slot(pos).Deadline() <= now {
					t.Fatalf("position %d with a passed deadline is %v after a sweep", pos, st)
				}
			}
		case 5: // a context ends
			for pos, cancel := range cancels {
				st := r.state(pos) // Unpublished: released and recycled
				pending := st != ringbuf.Unpublished && !st.Final()
				cancel()
				delete(cancels, pos)
				if pending {
					r.waitSettled(pos)
				}
				break
			}
			check("cancel")
		case 6: // reconnect: the broker says what it stored
			writer = 0
			lost, err := r.l.handshake(min(brokerLast, r.l.seq(r.l.maxWritten.Load())-1), false)
			require.NoError(t, err)
			require.NoError(t, lost)
			check("reconnect")
		case 7, 8:
			r.dispatch()
			check("dispatch")
		}
		if step == 350 && !closed {
			closed = true
			r.l.close()
		}
	}
	for _, cancel := range cancels {
		cancel()
	}
	_, tail := r.l.bounds()
	r.l.failBelow(tail, ringbuf.Closed)
	r.dispatch()
	check("close")
	head, _ := r.l.bounds()
	require.Equal(t, tail, head, "everything released at the end")
	require.Len(t, r.delivered, int(tail), "every position delivered exactly once")
}

// newTestLedger is a ledger alone, as a producer's lane has it: a budget of
// its own limits, and a dispatcher wake-up the test reads from wake; its
// ring flat (ringbuf.NewFlat) if flat, else paged.
func newTestLedger(maxPending int, maxBytes int64, timeout time.Duration, c *coarseClock, flat bool) (l *ledger, wake chan struct{}, err error) {
	wake = make(chan struct{}, 1)
	l, err = newLedger(maxPending, maxBytes, timeout, c, newBudget(maxPending, maxBytes, nil), func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}, make(chan struct{}, 1), flat)
	return l, wake, err
}

// TestEntrySlotIs64Bytes: a message's slot is 64 bytes (see entry), and
// the entry gives back the payload SendAsync found, in flat and paged
// rings.
func TestEntrySlotIs64Bytes(t *testing.T) {
	require.EqualValues(t, 64, unsafe.Sizeof(ringbuf.Slot[entry]{}))
	for _, flat := range []bool{true, false} {
		for _, limit := range []int{1, 7, 100, 5000} {
			l, _, err := newTestLedger(limit, 1<<20, time.Minute, nil, flat)
			require.NoError(t, err)
			for i := range min(limit, 40) {
				first, n, err := l.tryClaim([]int64{int64(i)})
				require.NoError(t, err)
				require.Equal(t, 1, n)
				msg := &Message{Payload: make([]byte, i)} // the first empty
				for j := range msg.Payload {
					msg.Payload[j] = byte(i + j)
				}
				var ctx context.Context // every other message's can end
				if i%2 == 1 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithCancel(context.Background())
					defer cancel()
				}
				l.publish(first, []*Message{msg}, func(MessageID, *Message, error) {}, ctx, 1, nil)
				e := l.entryAt(first)
				assert.Equal(t, msg.Payload, e.payload(), "flat %v, limit %d, position %d", flat, limit, first)
				assert.Len(t, e.payload(), i)
				assert.Equal(t, ctx, e.ctx())
				if ctx != nil {
					assert.True(t, e.hook.stop(), "the context's AfterFunc is registered")
				}
			}
		}
	}
}

// TestAckOfAResendTellsItsSend: a receipt that covers a position while the
// pump writes it again (an old connection's last receipt, beside a resend
// on the new one) moves the acked cursor past it while it is Writing, so
// ackThrough cannot hand it to its Send; the pump does, once it marks the
// position Written, and wakes the dispatcher. Before, the Send waited
// forever, and so did the dispatcher's walk for it.
func TestAckOfAResendTellsItsSend(t *testing.T) {
	r := newLedgerRig(t, 16)
	w := waiters.Get().(*waiter)
	pos, err := r.send(context.Background(), 10, 0, w)
	require.NoError(t, err)
	_, n := r.write(pos, 1<<16, 0)
	require.Equal(t, 1, n)
	require.Equal(t, ringbuf.Written, r.state(pos))
	for len(r.wake) > 0 {
		<-r.wake
	}
	testHookRunCopied = func() {
		testHookRunCopied = nil
		require.Equal(t, ringbuf.Writing, r.state(pos), "being written again")
		r.l.ackThrough(r.l.seq(pos)) // the old connection's receipt
	}
	defer func() { testHookRunCopied = nil }()
	_, n = r.write(pos, 1<<16, 0) // the resend
	require.Equal(t, 1, n)
	assert.Equal(t, ringbuf.Acked, r.state(pos))
	select {
	case st := <-w.ch:
		assert.Equal(t, ringbuf.Acked, st)
		assert.Equal(t, MessageID(r.l.seq(pos)), w.id)
	default:
		t.Fatal("the Send of a position acknowledged while written again was not told")
	}
	select {
	case <-r.wake:
	default:
		t.Fatal("the dispatcher was not woken for it")
	}
}

// TestLateNotifierLeavesAnotherSendsWaiter: a notifier that checked a
// Send's waiter, then stalled while another notifier handed the outcome
// over and the waiter went back to the pool and to a Send of another topic
// (whose positions start at 0 too: the same position), does not take it:
// that Send is not told an outcome of a message it never sent.
func TestLateNotifierLeavesAnotherSendsWaiter(t *testing.T) {
	a, b := newLedgerRig(t, 16), newLedgerRig(t, 16)
	w := waiters.Get().(*waiter)
	pos, err := a.send(context.Background(), 10, 0, w)
	require.NoError(t, err)
	a.write(pos, 1<<16, 0)
	testHookNotify = func() { // the first notifier stalls here
		testHookNotify = nil
		a.l.notify(pos, ringbuf.Acked) // a second one hands the outcome over
		require.Equal(t, ringbuf.Acked, <-w.ch)
		bpos, err := b.send(context.Background(), 10, 0, w) // the waiter's next Send, on topic b
		require.NoError(t, err)
		require.Equal(t, pos, bpos)
	}
	defer func() { testHookNotify = nil }()
	a.l.notify(pos, ringbuf.Acked)
	select {
	case st := <-w.ch:
		t.Fatalf("topic b's Send was told %v by topic a's late notifier", st)
	default:
	}
	assert.NotEqual(t, uint64(notified), w.ticket.Load(), "b's Send still waits")
	assert.Same(t, w, b.l.waitRef(pos, false).Load())
}

// TestNextBatchGrowsItsBufferByDoubling: a frame of 1 MiB built in an
// empty buffer takes a handful of allocations (the buffer doubles, run by
// run, from what the first run needs), not the score append alone makes;
// a frame that fits a small buffer grows no further than bigBuffer, which
// the pump's pool keeps any number of; and what was copied before each
// growth is in the frame, byte for byte.
func TestNextBatchGrowsItsBufferByDoubling(t *testing.T) {
	const size = 4093 // records of 4 KiB with their length and flags: frames grow to the byte limit
	r := newLedgerRigBytes(t, 4096, 4<<20)
	for i := range 500 {
		pos, err := r.claim(size)
		require.NoError(t, err)
		m := &Message{Payload: bytes.Repeat([]byte{byte(i)}, size)}
		r.l.publish(pos, []*Message{m}, func(MessageID, *Message, error) {}, nil, 1<<40, nil)
	}
	build := func(from uint64, limit int) (int, float64, uint64) {
		var n int
		var next uint64
		allocs := testing.AllocsPerRun(1, func() {
			r.bb = wire.BatchBuilder{} // an empty buffer each time
			next, n, _ = r.l.nextBatch(&r.bb, from, batchLimits{messages: 4096, bytes: limit, frame: wire.DefaultMaxFrameSize, end: math.MaxUint64}, 0)
		})
		return n, allocs, next
	}

	n, allocs, next := build(0, 1<<20)
	t.Logf("%v allocations for a frame of %d records", allocs, n)
	require.Equal(t, (1<<20-wire.BatchHeaderSize)/(size+wire.RecordOverhead(size)), n)
	assert.LessOrEqual(t, allocs, 7.0, "allocations for a frame of 1 MiB from an empty buffer")
	recs := frameRecords(t, r.bb.Finish())
	require.Len(t, recs, n)
	for i, rec := range recs {
		require.Equal(t, bytes.Repeat([]byte{byte(i)}, size), rec.Payload, "record %d", i)
	}

	n, _, _ = build(next, 40<<10) // 9 records
	require.Equal(t, 9, n)
	assert.LessOrEqual(t, cap(r.bb.Bytes()), bigBuffer, "a frame of 40 KiB kept within bigBuffer")
}

// TestFramesOfMidSizedRecordsStayCached: a frame whose next record would
// take it past cachedFrameBytes closes there when it holds from
// minCachedRecords to maxCachedRecords; one of fewer, larger records or of
// more, smaller ones grows to the byte limit or the message limit; a lower
// limit, or the message limit, closes a frame first; without lim.cached (a
// producer that compresses) every frame grows to the limit. nextBatch
// reports the byte bound that closed a frame, 0 for none.
func TestFramesOfMidSizedRecordsStayCached(t *testing.T) {
	frame := func(size, n, maxMessages, maxBytes, cached int) (int, int, int) {
		t.Helper()
		r := newLedgerRigBytes(t, 8192, 16<<20)
		payload := make([]byte, size)
		for range n {
			pos, err := r.claim(size)
			require.NoError(t, err)
			r.l.publish(pos, []*Message{{Payload: payload}}, func(MessageID, *Message, error) {}, nil, 1<<40, nil)
		}
		_, got, closedAt := r.l.nextBatch(&r.bb, 0, batchLimits{messages: maxMessages, bytes: maxBytes, frame: wire.DefaultMaxFrameSize, end: math.MaxUint64, cached: cached}, 0)
		return got, r.bb.Size(), closedAt
	}
	fit := func(size, bytes int) int { // records of size that fit a frame of bytes
		return (bytes - wire.BatchHeaderSize) / (size + wire.RecordOverhead(size))
	}
	sizeFor := func(records int) int { // the largest records that many of which fit cachedFrameBytes
		return (cachedFrameBytes-wire.BatchHeaderSize)/records - 3
	}
	for _, tc := range []struct {
		name                        string
		size, maxMessages, maxBytes int
		records, closedAt           int
	}{
		{"1 KiB records", 1024, 4096, 1 << 20, fit(1024, cachedFrameBytes), cachedFrameBytes},
		{"512 B records", 512, 4096, 1 << 20, fit(512, cachedFrameBytes), cachedFrameBytes},
		{"64 records just fit", sizeFor(64), 4096, 1 << 20, 64, cachedFrameBytes},
		{"63 records fit: larger records", sizeFor(63), 4096, 1 << 20, fit(sizeFor(63), 1<<20), 1 << 20},
		{"256 records just fit", sizeFor(256), 4096, 1 << 20, 256, cachedFrameBytes},
		{"257 records fit: smaller records", sizeFor(257), 8192, 1 << 20, fit(sizeFor(257), 1<<20), 1 << 20},
		{"100 B records", 100, 4096, 1 << 20, 4096, 0},
		{"4 KiB records", 4096, 4096, 1 << 20, fit(4096, 1<<20), 1 << 20},
		{"a limit under cachedFrameBytes", 1024, 4096, 64 << 10, fit(1024, 64<<10), 64 << 10},
		{"the message limit first", 1024, 100, 1 << 20, 100, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, size, closedAt := frame(tc.size, min(2*tc.records+10, 8000), tc.maxMessages, tc.maxBytes, cachedFrameBytes)
			assert.Equal(t, tc.records, n, "records")
			assert.Equal(t, tc.closedAt, closedAt, "the bound that closed the frame")
			if tc.closedAt > 0 {
				assert.LessOrEqual(t, size, tc.closedAt, "the frame within the bound that closed it")
			}
		})
	}
	t.Run("a producer that compresses", func(t *testing.T) {
		n, _, closedAt := frame(1024, 1100, 4096, 1<<20, 0)
		assert.Equal(t, fit(1024, 1<<20), n, "mid-sized records grow to the limit")
		assert.Equal(t, 1<<20, closedAt)
	})
}

// TestCachedFramesRandomSizes: messages of random sizes around the range
// that cachedFrameBytes takes (200 B to 3 KB), some expired, written with
// the cached bound: each frame closed at cachedFrameBytes holds
// minCachedRecords to maxCachedRecords records within it, each closed at
// the limit fits the limit, and every position is written once, in order,
// or resolved as expired.
func TestCachedFramesRandomSizes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 42))
	r := newLedgerRigBytes(t, 8192, 32<<20)
	const total, now = 6000, 100
	expired := map[uint64]bool{}
	for i := range total {
		// Runs of sizes around the rule's three cases: mid-sized, large,
		// small, mid-sized, large, mid-sized.
		c := [][2]int{{600, 1200}, {2100, 900}, {200, 300}}[[]int{0, 1, 2, 0, 1, 0}[i/1000]]
		size := c[0] + rng.IntN(c[1])
		pos, err := r.claim(size)
		require.NoError(t, err)
		d := int64(1 << 40)
		if rng.IntN(300) == 0 {
			d, expired[pos] = now-1, true
		}
		r.l.publish(pos, []*Message{{Payload: bytes.Repeat([]byte{byte(i)}, size)}}, func(MessageID, *Message, error) {}, nil, d, nil)
	}
	lim := batchLimits{messages: 4096, bytes: 1 << 20, frame: wire.DefaultMaxFrameSize, end: math.MaxUint64, cached: cachedFrameBytes, sum: true}
	closedBy := map[int]int{}
	var pos uint64
	next := 0 // the next message index expected in a frame
	for pos < total {
		from := pos
		var n, closedAt int
		pos, n, closedAt = r.l.nextBatch(&r.bb, pos, lim, now)
		require.Greater(t, pos, from, "no progress at %d", from)
		for next < int(pos) && expired[uint64(next)] && n == 0 {
			next++
		}
		if n == 0 {
			continue
		}
		size := r.bb.Size()
		switch closedAt {
		case cachedFrameBytes:
			require.LessOrEqual(t, size, cachedFrameBytes)
			require.GreaterOrEqual(t, n, minCachedRecords)
			require.LessOrEqual(t, n, maxCachedRecords)
		case 1 << 20:
			require.LessOrEqual(t, size, 1<<20)
		case 0: // an expired message, the message limit, or the end
		default:
			t.Fatalf("closed at %d bytes", closedAt)
		}
		closedBy[closedAt]++
		for _, rec := range frameRecords(t, r.bb.Finish()) {
			for expired[uint64(next)] {
				next++
			}
			require.Equal(t, byte(next), rec.Payload[0], "record for message %d", next)
			next++
		}
	}
	for next < total && expired[uint64(next)] {
		next++
	}
	require.Equal(t, total, next, "every message written or expired")
	assert.NotZero(t, closedBy[cachedFrameBytes], "frames closed at cachedFrameBytes")
	assert.NotZero(t, closedBy[1<<20], "frames closed at the limit")
	t.Logf("frames by the bound that closed them: %v", closedBy)
}
