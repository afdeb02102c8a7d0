package core_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/inflightmq/inflight/internal/testkit"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/transport/mem"
)

// TestCloseFailsPendingWithErrClosed: with the broker gone, Close gives up
// draining when its context ends, fails what is pending with ErrClosed,
// releases blocked senders, refuses later sends, and leaves no goroutine.
func TestCloseFailsPendingWithErrClosed(t *testing.T) {
	e := newEnv(t, core.MaxPending(100), core.MaxPendingPerTopic(100), core.SendTimeout(time.Minute))
	_, err := e.p.Send(context.Background(), &core.Message{Payload: []byte("first")})
	require.NoError(t, err)
	e.disconnect()

	const pending, blocked = 100, 5
	rec := newRecorder(pending)
	for i := range pending {
		require.NoError(t, e.p.SendAsync(context.Background(), &core.Message{Payload: payload(i)}, rec.cb(i)))
	}
	blockedErrs := make(chan error, blocked)
	var wg sync.WaitGroup
	for i := range blocked {
		wg.Go(func() {
			blockedErrs <- e.p.SendAsync(context.Background(), &core.Message{}, rec.cb(pending+i))
		})
	}
	// Each blocked sender is waiting for room (yielding or parked); Close
	// must release it whichever.
	waitUntil(t, "senders to be blocked", func() bool { return e.p.Stats().Pending == pending })

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = e.p.Close(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "Close reports that draining was cut short")
	assert.Less(t, time.Since(start), time.Second)

	wg.Wait()
	close(blockedErrs)
	for err := range blockedErrs {
		assert.ErrorIs(t, err, core.ErrClosed, "blocked sender released with ErrClosed")
	}
	rec.wait(t)
	for i := range pending {
		o := rec.get(i)
		assert.Equal(t, 1, o.n, "message %d: exactly one callback", i)
		assert.ErrorIs(t, o.err, core.ErrClosed, "message %d", i)
	}
	assert.ErrorIs(t, e.p.SendAsync(context.Background(), &core.Message{}, rec.cb(999)), core.ErrClosed)
	_, err = e.p.Send(context.Background(), &core.Message{})
	assert.ErrorIs(t, err, core.ErrClosed)
	assert.NoError(t, e.p.Close(context.Background()), "second Close")
	assert.Equal(t, uint64(pending), e.p.Stats().Failed)

	require.NoError(t, e.dialer.Close())
	goleak.VerifyNone(t)
}

// TestCloseDrains: with a connection, Close sends what is pending before it
// returns.
func TestCloseDrains(t *testing.T) {
	e := newEnv(t, core.SendTimeout(time.Minute))
	e.dialer.DelayReceipts(10 * time.Millisecond)
	const n = 2000
	rec := newRecorder(n)
	for i := range n {
		require.NoError(t, e.p.SendAsync(context.Background(), &core.Message{Payload: payload(i)}, rec.cb(i)))
	}
	require.NoError(t, e.p.Close(context.Background()))
	rec.mu.Lock()
	assert.Len(t, rec.order, n, "every message succeeded before Close returned")
	rec.mu.Unlock()
	assert.Equal(t, n, e.store.Len("test-producer"))
}

// TestConcurrentClose: Close from many goroutines at once; all return, one
// does the work.
func TestConcurrentClose(t *testing.T) {
	e := newEnv(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { assert.NoError(t, e.p.Close(context.Background())) })
	}
	wg.Wait()
}

// TestProducersComeAndGo: producers are created, used and closed while
// others send; they share one coarse clock, which starts with the first and
// stops with the last. (TestChaos, whose seeds run side by side, is what
// caught its wake-up channel being replaced under readers.)
func TestProducersComeAndGo(t *testing.T) {
	b, _ := broker.New(broker.NewMemoryStore())
	d := mem.NewDialer(b)
	defer d.Close()
	var wg sync.WaitGroup
	for g := range 2 { // two, so that the count of producers often drops to zero
		wg.Go(func() {
			for round := range 40 {
				p, err := core.New(d, core.Name(fmt.Sprintf("p%d-%d", g, round)))
				if !assert.NoError(t, err) {
					return
				}
				for range 5 {
					_, err := p.Send(context.Background(), &core.Message{Payload: []byte("x")})
					assert.NoError(t, err)
				}
				assert.NoError(t, p.Close(context.Background()))
			}
		})
	}
	wg.Wait()
}

// TestCloseRunsEveryCallbackBeforeReturning: 2000 messages pending, no
// broker answering, Close(1s): the drain takes the whole second, then the
// rest fail with ErrClosed, and every callback has run and the queue is
// empty when Close returns, shortly after the second (within
// lateTolerance: failing and calling back 2000 messages under -race on a
// loaded host, not a minute's SendTimeout).
func TestCloseRunsEveryCallbackBeforeReturning(t *testing.T) {
	const n = 2000
	cases := []struct {
		name string
		// down brings the producer (dials refused) to the state in which
		// nothing will resolve its messages.
		down func(t *testing.T, d *mem.Dialer, p *core.Producer)
	}{
		{"never connected", func(t *testing.T, d *mem.Dialer, p *core.Producer) {}},
		{"broker stopped", func(t *testing.T, d *mem.Dialer, p *core.Producer) {
			d.RefuseDials(false)
			_, err := p.Send(context.Background(), &core.Message{Payload: []byte("connect")})
			require.NoError(t, err)
			d.RefuseDials(true)
			d.DropConnections()
		}},
		{"connection stalled", func(t *testing.T, d *mem.Dialer, p *core.Producer) {
			d.RefuseDials(false)
			_, err := p.Send(context.Background(), &core.Message{Payload: []byte("connect")})
			require.NoError(t, err)
			d.StallWrites(true)
			t.Cleanup(func() { d.StallWrites(false) })
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := broker.New(broker.NewMemoryStore())
			require.NoError(t, err)
			d := mem.NewDialer(b)
			d.RefuseDials(true)
			p, err := core.New(d, core.Name("close-test"), core.SendTimeout(time.Minute),
				core.ReconnectBackoff(time.Millisecond, 10*time.Millisecond))
			require.NoError(t, err)
			t.Cleanup(func() {
				testkit.CloseProducer(t, p, 100*time.Millisecond)
				_ = d.Close()
			})
			c.down(t, d, p)

			var ran, closed atomic.Int64
			cb := func(_ core.MessageID, _ *core.Message, err error) {
				ran.Add(1)
				if errors.Is(err, core.ErrClosed) {
					closed.Add(1)
				}
			}
			msg := &core.Message{Payload: make([]byte, 100)}
			for range n {
				require.NoError(t, p.SendAsync(context.Background(), msg, cb))
			}

			var took time.Duration
			var st core.Stats
			var got int64
			watchdog(t, waitTimeout, "Close", func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				start := time.Now()
				err := p.Close(ctx)
				took = time.Since(start)
				got, st = ran.Load(), p.Stats()
				assert.ErrorIs(t, err, context.DeadlineExceeded)
			})
			assert.Less(t, took, time.Second+lateTolerance, "Close took %v", took)
			assert.EqualValues(t, n, got, "callbacks run when Close returned")
			assert.EqualValues(t, n, closed.Load(), "callbacks with ErrClosed")
			assert.Zero(t, st.Pending, "Stats().Pending after Close")
			assert.Zero(t, st.PendingBytes, "Stats().PendingBytes after Close")
			t.Logf("Close took %v", took)
		})
	}
}

// TestCloseWaitsForAcknowledgedCallbacksThatKeepRunning: past its
// context's end, Close waits for callbacks as long as they keep starting
// (see Producer.Close), and acknowledged messages' callbacks are among
// them, though the dispatcher counts those in Stats in runs, before their
// callbacks: 120 acknowledged messages whose callbacks take 3ms each (runs
// of 64 take ~190ms, more than the 100ms Close allows one callback) all
// run before Close returns.
func TestCloseWaitsForAcknowledgedCallbacksThatKeepRunning(t *testing.T) {
	e := newEnv(t, core.SendTimeout(time.Minute))
	const n = 120
	gate := make(chan struct{})
	var ran atomic.Int64
	for i := range n {
		require.NoError(t, e.p.SendAsync(context.Background(), &core.Message{Payload: payload(i)},
			func(_ core.MessageID, _ *core.Message, err error) {
				assert.NoError(t, err)
				if i == 0 {
					<-gate // the others are acknowledged meanwhile
				} else {
					time.Sleep(3 * time.Millisecond) // a callback that does some work
				}
				ran.Add(1)
			}))
	}
	waitUntil(t, "every message stored", func() bool { return e.store.Len("test-producer") == n })
	waitUntil(t, "every message acknowledged", func() bool { return e.p.Stats().Unacked == 0 })

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Close drains nothing: it goes straight to waiting for callbacks
	var got int64
	watchdog(t, waitTimeout, "Close", func() {
		go close(gate)
		assert.ErrorIs(t, e.p.Close(ctx), context.Canceled)
		got = ran.Load()
	})
	assert.EqualValues(t, n, got, "callbacks run when Close returned")
}
