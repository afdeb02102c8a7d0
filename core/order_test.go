package core_test

import (
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/core"
)

// TestCallbackOrder sends messages while every connection is cut after a
// few frames: successes must be reported in send order and stored exactly
// once, in order.
func TestCallbackOrder(t *testing.T) {
	t.Run("one sender", func(t *testing.T) {
		e := newEnv(t, core.SendTimeout(time.Minute), core.MaxPending(1024), core.MaxPendingPerTopic(1024), core.MaxBatchMessages(64))
		e.dialer.DropAfterFrames(5) // HELLO + 4 batches per connection
		const n = 10000
		rec := newRecorder(n)
		for i := range n {
			require.NoError(t, e.p.SendAsync(context.Background(), &core.Message{Payload: payload(i)}, rec.cb(i)))
		}
		rec.wait(t)
		require.Len(t, rec.order, n, "every message succeeds")
		for k, i := range rec.order {
			require.Equal(t, k, i, "success callback %d was for message %d", k, i)
			require.Equal(t, 1, rec.get(i).n)
		}
		recs := e.store.Records("test-producer")
		require.Len(t, recs, n)
		for i, r := range recs {
			require.Equal(t, payload(i), r.Payload, "store position %d", i)
			require.Equal(t, uint64(rec.get(i).id), r.Seq)
		}
		st := e.p.Stats()
		assert.Greater(t, st.Reconnects, uint64(10), "the test must really reconnect")
		assert.Equal(t, uint64(n), st.Acked)
		t.Logf("%d reconnects, %d batches, %d messages written (resends included)", st.Reconnects, st.Batches, st.Sent)
	})

	t.Run("eight senders", func(t *testing.T) {
		e := newEnv(t, core.SendTimeout(time.Minute), core.MaxPending(1024), core.MaxPendingPerTopic(1024), core.MaxBatchMessages(64))
		e.dialer.DropAfterFrames(5)
		const senders, per = 8, 1500
		rec := newRecorder(senders * per)
		var wg sync.WaitGroup
		for s := range senders {
			wg.Go(func() {
				for i := range per {
					k := s*per + i
					msg := &core.Message{Payload: binary.BigEndian.AppendUint32(nil, uint32(k))}
					if !assert.NoError(t, e.p.SendAsync(context.Background(), msg, rec.cb(k))) {
						return
					}
				}
			})
		}
		wg.Wait()
		rec.wait(t)
		next := make([]int, senders)
		for _, k := range rec.order {
			s, i := k/per, k%per
			require.Equal(t, next[s], i, "sender %d: success out of order", s)
			next[s]++
		}
		for s := range senders {
			require.Equal(t, per, next[s])
		}
		recs := e.store.Records("test-producer")
		require.Len(t, recs, senders*per)
		next = make([]int, senders)
		for j, r := range recs {
			if j > 0 {
				require.Greater(t, r.Seq, recs[j-1].Seq)
			}
			k := int(binary.BigEndian.Uint32(r.Payload))
			s, i := k/per, k%per
			require.Equal(t, next[s], i, "sender %d: stored out of order", s)
			next[s]++
		}
	})
}

// TestResendAfterReconnectNoDuplicates: the broker stores messages whose
// receipts are lost, and others are lost in flight; after reconnecting the
// producer learns from HELLO_OK what was stored, reports it, and resends the
// rest, without duplicates or gaps.
func TestResendAfterReconnectNoDuplicates(t *testing.T) {
	// No receipt comes for the first group: a window of frames in flight
	// wide enough for one frame per message lets all of it be written,
	// however the pump batches it.
	e := newEnv(t, core.SendTimeout(time.Minute), core.MaxFramesInFlight(1024))
	_, err := e.p.Send(context.Background(), &core.Message{Payload: payload(0)})
	require.NoError(t, err)
	require.NoError(t, e.p.Flush(context.Background())) // Send returns before its slot is released

	// Stored, but the receipts never arrive.
	e.dialer.DropReceipts(true)
	const stored, lost = 300, 200
	rec := newRecorder(stored + lost)
	for i := range stored {
		require.NoError(t, e.p.SendAsync(context.Background(), &core.Message{Payload: payload(1 + i)}, rec.cb(i)))
	}
	waitUntil(t, "the broker to store the first group", func() bool { return e.store.Len("test-producer") == 1+stored })
	assert.Equal(t, 1+stored, e.p.Stats().Pending+1, "no receipt arrived, all still pending")

	// Written to the connection, never read by the broker.
	e.dialer.StallWrites(true)
	for i := range lost {
		require.NoError(t, e.p.SendAsync(context.Background(), &core.Message{Payload: payload(1 + stored + i)}, rec.cb(stored+i)))
	}
	// The pump writes until its frames in flight are all held by the
	// stalled broker; the rest stays in the ring.
	waitUntil(t, "part of the second group to be written", func() bool { return e.p.Stats().Sent > uint64(1+stored) })

	e.dialer.DropConnections()
	e.dialer.DropReceipts(false)
	e.dialer.StallWrites(false)
	rec.wait(t)

	for i := range stored + lost {
		o := rec.get(i)
		require.NoError(t, o.err, "message %d", i)
		require.Equal(t, core.MessageID(i+2), o.id)
	}
	recs := e.store.Records("test-producer")
	require.Len(t, recs, 1+stored+lost)
	for i, r := range recs {
		require.Equal(t, uint64(i+1), r.Seq, "no gap, no duplicate")
		require.Equal(t, payload(i), r.Payload)
	}
	assert.GreaterOrEqual(t, e.p.Stats().Reconnects, uint64(1))
}

// TestFlushWaitsForReceipts: Flush returns once every earlier message's
// callback ran, and gives up with the context's error.
func TestFlushWaitsForReceipts(t *testing.T) {
	e := newEnv(t, core.SendTimeout(time.Minute))
	e.dialer.DelayReceipts(20 * time.Millisecond)
	const n = 500
	rec := newRecorder(n)
	for i := range n {
		require.NoError(t, e.p.SendAsync(context.Background(), &core.Message{Payload: payload(i)}, rec.cb(i)))
	}
	require.NoError(t, e.p.Flush(context.Background()))
	rec.mu.Lock()
	got := rec.got
	rec.mu.Unlock()
	assert.Equal(t, n, got, "every callback ran before Flush returned")
	assert.Equal(t, n, e.store.Len("test-producer"))

	e.disconnect()
	require.NoError(t, e.p.SendAsync(context.Background(), &core.Message{}, func(core.MessageID, *core.Message, error) {}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, e.p.Flush(ctx), context.DeadlineExceeded)
}
