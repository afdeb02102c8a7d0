package core_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/clock"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/transport/mem"
)

// TestOverloadBoundsMemory floods a producer whose broker stopped reading:
// pending bytes never exceed MaxPendingBytes (plus one message), the heap
// stays within that plus a constant, blocked senders give up when their
// context ends, and fail-fast senders get ErrQueueFull.
func TestOverloadBoundsMemory(t *testing.T) {
	const limit, size = 1 << 20, 4 << 10
	e := newEnv(t, core.MaxPending(1<<16), core.MaxPendingPerTopic(1<<16), core.MaxPendingBytes(limit), core.MaxPendingBytesPerTopic(limit), core.SendTimeout(time.Minute))
	_, err := e.p.Send(context.Background(), &core.Message{})
	require.NoError(t, err)
	e.dialer.StallWrites(true)

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	var maxPending atomic.Int64
	stopWatch := make(chan struct{})
	var watch sync.WaitGroup
	watch.Go(func() {
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(100 * time.Microsecond):
			}
			if b := e.p.Stats().PendingBytes; b > maxPending.Load() {
				maxPending.Store(b)
			}
		}
	})

	var blockedErrs, fullErrs, accepted atomic.Int64
	var wg sync.WaitGroup
	for s := range 8 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			for {
				msg := &core.Message{Payload: make([]byte, size)} // fresh memory each time
				var err error
				if s%2 == 0 {
					err = e.p.SendAsync(ctx, msg, func(core.MessageID, *core.Message, error) {})
				} else {
					err = e.p.TrySendAsync(ctx, msg, func(core.MessageID, *core.Message, error) {})
				}
				switch {
				case err == nil:
					accepted.Add(1)
				case errors.Is(err, core.ErrQueueFull):
					fullErrs.Add(1)
					if ctx.Err() != nil {
						return
					}
					runtime.Gosched()
				case errors.Is(err, context.DeadlineExceeded):
					if s%2 == 0 {
						blockedErrs.Add(1) // a blocked sender released by its context
					}
					return
				default:
					t.Errorf("unexpected error %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	// What the producer retains, not the garbage of refused messages: the
	// pending ones are still referenced by the ring (writes are stalled).
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	close(stopWatch)
	watch.Wait()

	assert.LessOrEqual(t, maxPending.Load(), int64(limit+size), "pending bytes over the limit")
	grown := int64(after.HeapInuse) - int64(before.HeapInuse)
	assert.Less(t, grown, int64(limit+8<<20), "heap grew past the limit plus a constant")
	assert.Equal(t, int64(4), blockedErrs.Load(), "every blocking sender was released by its context")
	assert.Positive(t, fullErrs.Load(), "fail-fast senders were refused")
	t.Logf("accepted %d (%d KiB), refused %d with ErrQueueFull, peak pending %d KiB, heap grew %d KiB",
		accepted.Load(), accepted.Load()*size>>10, fullErrs.Load(), maxPending.Load()>>10, grown>>10)
}

// TestBlockingCallbackDoesNotStallReceipts: while a callback blocks, the
// receipts of later messages still resolve them, so they do not time out;
// the blocked backlog is bounded by the ring (fail-fast sends see
// ErrQueueFull).
func TestBlockingCallbackDoesNotStallReceipts(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	store := broker.NewMemoryStore()
	b, _ := broker.New(store)
	d := mem.NewDialer(b)
	defer d.Close()
	const pending = 50
	p, err := core.New(d, core.Name("blocked"), core.WithClock(clk), core.SendTimeout(time.Second),
		core.MaxPending(pending), core.MaxPendingPerTopic(pending), core.Heartbeat(time.Hour))
	require.NoError(t, err)
	defer p.Close(context.Background())

	release := make(chan struct{})
	unblock := sync.OnceFunc(func() { close(release) })
	defer unblock() // before Close, which would wait for the callback, if a check fails
	entered := make(chan struct{})
	require.NoError(t, p.SendAsync(context.Background(), &core.Message{Payload: []byte("blocker")},
		func(core.MessageID, *core.Message, error) { close(entered); <-release }))
	testkit.WaitChan(t, entered, "the blocking callback") // the dispatcher is now stuck in it

	rec := newRecorder(pending - 1)
	for i := range pending - 1 {
		require.NoError(t, p.SendAsync(context.Background(), &core.Message{Payload: payload(i)}, rec.cb(i)))
	}
	assert.ErrorIs(t, p.TrySendAsync(context.Background(), &core.Message{}, rec.cb(-1)), core.ErrQueueFull,
		"the ring bounds the backlog behind a blocked callback")
	waitUntil(t, "the broker to store everything", func() bool { return store.Len("blocked") == pending })
	waitUntil(t, "every receipt to arrive", func() bool { return p.Stats().Unacked == 0 })

	// Past every deadline: the sweeper runs and re-arms, and must find
	// nothing to expire, because receipts resolved the messages already.
	timers := clk.Timers()
	clk.Advance(2 * time.Second)
	waitUntil(t, "the sweeper to run", func() bool { return clk.Timers() >= timers })
	unblock()
	rec.wait(t)
	for i := range pending - 1 {
		require.NoError(t, rec.get(i).err, "message %d", i)
	}
	assert.Zero(t, p.Stats().TimedOut)
}
