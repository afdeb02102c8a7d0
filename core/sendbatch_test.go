package core_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/wire"
)

// batchCB returns one callback for every message of a batch: it finds the
// message's index in r from its payload (payload(base+i)).
func batchCB(r *recorder, base int) core.Callback {
	return func(id core.MessageID, m *core.Message, err error) {
		p := m.Payload
		i := int(p[0])<<24 | int(p[1])<<16 | int(p[2])<<8 | int(p[3])
		r.cb(i-base)(id, m, err)
	}
}

func batchOf(from, n int) []*core.Message {
	msgs := make([]*core.Message, n)
	for i := range msgs {
		msgs[i] = &core.Message{Payload: payload(from + i)}
	}
	return msgs
}

// TestSendBatch: senders send runs longer than one claim through a small
// ring, so that claims are cut and senders wait; every message gets one
// callback and is stored once, and each sender's IDs grow with the index.
func TestSendBatch(t *testing.T) {
	const senders, perSender = 3, 1000
	e := newEnv(t, core.MaxPending(100), core.MaxPendingPerTopic(100))
	rec := newRecorder(senders * perSender)
	cb := batchCB(rec, 0)
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			msgs := batchOf(s*perSender, perSender)
			for len(msgs) > 0 {
				k := min(len(msgs), 1+len(msgs)%150) // runs of 1 to 150
				n, err := e.p.SendBatch(context.Background(), msgs[:k], cb)
				if !assert.NoError(t, err) || !assert.Equal(t, k, n) {
					return
				}
				msgs = msgs[k:]
			}
		})
	}
	wg.Wait()
	rec.wait(t)
	for s := range senders {
		var last core.MessageID
		for i := s * perSender; i < (s+1)*perSender; i++ {
			o := rec.get(i)
			require.NoError(t, o.err, "message %d", i)
			require.Equal(t, 1, o.n, "callbacks of message %d", i)
			require.Greater(t, o.id, last, "message %d", i)
			last = o.id
		}
	}
	assert.Equal(t, senders*perSender, e.store.Len("test-producer"))
}

// TestSendBatchStopsAtBadMessage: the messages before the first one
// SendAsync would refuse are enqueued (n says how many) and get their
// callbacks; that one and the rest get none.
func TestSendBatchStopsAtBadMessage(t *testing.T) {
	for _, tc := range []struct {
		name string
		bad  int
		msg  *core.Message
		err  error
	}{
		{"nil message first", 0, nil, core.ErrNilMessage},
		{"nil message in the second claim", 70, nil, core.ErrNilMessage},
		{"key too long", 3, &core.Message{Key: make([]byte, wire.MaxKeyLen+1)}, core.ErrInvalidMessage},
		{"too large", 64, &core.Message{Payload: make([]byte, wire.DefaultMaxFrameSize)}, core.ErrMessageTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			msgs := batchOf(0, 100)
			msgs[tc.bad] = tc.msg
			rec := newRecorder(tc.bad)
			n, err := e.p.SendBatch(context.Background(), msgs, batchCB(rec, 0))
			require.ErrorIs(t, err, tc.err)
			require.Equal(t, tc.bad, n)
			require.NoError(t, e.p.Flush(context.Background()))
			if tc.bad > 0 {
				rec.wait(t)
			}
			for i := range 100 {
				o := rec.get(i)
				if i < tc.bad {
					assert.NoError(t, o.err, "message %d", i)
					assert.Equal(t, 1, o.n, "callbacks of message %d", i)
				} else {
					assert.Zero(t, o.n, "message %d was not enqueued", i)
				}
			}
		})
	}
}

// TestSendBatchQueueFull: without BlockIfFull, SendBatch enqueues what
// fits and returns ErrQueueFull for the rest.
func TestSendBatchQueueFull(t *testing.T) {
	e := newEnv(t, core.MaxPending(10), core.MaxPendingPerTopic(10), core.BlockIfFull(false))
	_, err := e.p.Send(context.Background(), &core.Message{Payload: payload(0)})
	require.NoError(t, err)
	// Send returns before the dispatcher releases its position.
	waitUntil(t, "the first message to be released", func() bool { return e.p.Stats().Pending == 0 })
	e.dialer.StallWrites(true)
	rec := newRecorder(10)
	n, err := e.p.SendBatch(context.Background(), batchOf(1, 25), batchCB(rec, 1))
	require.ErrorIs(t, err, core.ErrQueueFull)
	require.Equal(t, 10, n)
	e.dialer.StallWrites(false)
	rec.wait(t)
	for i := range 10 {
		assert.NoError(t, rec.get(i).err, "message %d", i)
	}
}

func TestSendBatchBadArguments(t *testing.T) {
	e := newEnv(t)
	cb := func(core.MessageID, *core.Message, error) { t.Error("callback for a refused batch") }
	msgs := batchOf(0, 3)
	n, err := e.p.SendBatch(context.Background(), msgs, nil)
	assert.ErrorIs(t, err, core.ErrNilCallback)
	assert.Zero(t, n)
	n, err = e.p.SendBatch(nil, msgs, cb)
	assert.ErrorIs(t, err, core.ErrNilContext)
	assert.Zero(t, n)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n, err = e.p.SendBatch(ctx, msgs, cb)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, n)
	n, err = e.p.SendBatch(context.Background(), nil, cb)
	assert.NoError(t, err)
	assert.Zero(t, n)
	require.NoError(t, e.p.Close(context.Background()))
	n, err = e.p.SendBatch(context.Background(), msgs, cb)
	assert.ErrorIs(t, err, core.ErrClosed)
	assert.Zero(t, n)
}

// TestSendBatchContextEnds: ctx bounds the life of every message of the
// batch, as for SendAsync.
func TestSendBatchContextEnds(t *testing.T) {
	e := newEnv(t)
	_, err := e.p.Send(context.Background(), &core.Message{Payload: payload(0)})
	require.NoError(t, err)
	e.dialer.StallWrites(true)
	ctx, cancel := context.WithCancel(context.Background())
	rec := newRecorder(100)
	n, err := e.p.SendBatch(ctx, batchOf(1, 100), batchCB(rec, 1))
	require.NoError(t, err)
	require.Equal(t, 100, n)
	cancel()
	rec.wait(t)
	for i := range 100 {
		o := rec.get(i)
		assert.ErrorIs(t, o.err, context.Canceled, "message %d", i)
		assert.Equal(t, 1, o.n, "callbacks of message %d", i)
	}
	e.dialer.StallWrites(false)
}

// TestSendBatchWaitsForRoom: with BlockIfFull (the default), SendBatch
// waits for room after enqueueing what fits, until room comes or ctx ends.
func TestSendBatchWaitsForRoom(t *testing.T) {
	e := newEnv(t, core.MaxPending(5), core.MaxPendingPerTopic(5))
	_, err := e.p.Send(context.Background(), &core.Message{Payload: payload(0)})
	require.NoError(t, err)
	waitUntil(t, "the first message to be released", func() bool { return e.p.Stats().Pending == 0 })
	e.dialer.StallWrites(true)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	rec := newRecorder(5)
	n, err := e.p.SendBatch(ctx, batchOf(1, 10), batchCB(rec, 1))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, 5, n)
	rec.wait(t) // ctx ended: the five enqueued are canceled (or were stored)
	for i := range 5 {
		assert.Equal(t, 1, rec.get(i).n, "callbacks of message %d", i)
	}

	waitUntil(t, "the ring to empty", func() bool { return e.p.Stats().Pending == 0 })
	rec = newRecorder(10)
	res := make(chan int, 1)
	go func() {
		n, err := e.p.SendBatch(context.Background(), batchOf(100, 10), batchCB(rec, 100))
		assert.NoError(t, err)
		res <- n
	}()
	waitUntil(t, "five to be pending", func() bool { return e.p.Stats().Pending == 5 })
	e.dialer.StallWrites(false)
	select {
	case n := <-res:
		assert.Equal(t, 10, n)
	case <-time.After(waitTimeout):
		t.Fatal("SendBatch still waiting for room")
	}
	rec.wait(t)
	for i := range 10 {
		o := rec.get(i)
		assert.NoError(t, o.err, "message %d", i)
		assert.Equal(t, 1, o.n, "callbacks of message %d", i)
	}
}
