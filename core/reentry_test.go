package core_test

import (
	"context"
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
	"github.com/inflightmq/inflight/transport/mem"
)

// watchdog runs f on its own goroutine and fails the test if f has not
// returned within limit, instead of hanging the suite.
func watchdog(t *testing.T, limit time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("%s: still running after %v", what, limit)
	}
}

// inCallback sends one message whose callback runs f, and waits (bounded)
// until f returned. Later messages queue behind it.
func inCallback(t *testing.T, p *core.Producer, limit time.Duration, f func()) {
	t.Helper()
	returned := make(chan struct{})
	require.NoError(t, p.SendAsync(context.Background(), &core.Message{Payload: []byte("outer")},
		func(core.MessageID, *core.Message, error) {
			defer close(returned)
			f()
		}))
	select {
	case <-returned:
	case <-time.After(limit):
		t.Fatalf("callback still running after %v", limit)
	}
}

// blockCallbacks sends a message whose callback blocks until the returned
// channel is closed, and returns once that callback runs.
func blockCallbacks(t *testing.T, p *core.Producer) chan struct{} {
	t.Helper()
	release := make(chan struct{})
	entered := make(chan struct{})
	require.NoError(t, p.SendAsync(context.Background(), &core.Message{Payload: []byte("blocker")},
		func(core.MessageID, *core.Message, error) { close(entered); <-release }))
	select {
	case <-entered:
	case <-time.After(waitTimeout):
		t.Fatal("the blocking callback did not run")
	}
	return release
}

// TestCloseInsideCallbackReturnsByContext: Close called from a callback
// while another message is pending (its receipt never comes) returns ctx's
// error when ctx ends, and the callbacks still owed then run exactly once.
func TestCloseInsideCallbackReturnsByContext(t *testing.T) {
	e := newEnv(t, core.SendTimeout(time.Minute))
	_, err := e.p.Send(context.Background(), &core.Message{Payload: []byte("connect")})
	require.NoError(t, err)

	const later = 5
	rec := newRecorder(later)
	var closeErr error
	var took time.Duration
	inCallback(t, e.p, 5*time.Second, func() {
		e.dialer.DropReceipts(true)
		for i := range later {
			require.NoError(t, e.p.SendAsync(context.Background(), &core.Message{Payload: payload(i)}, rec.cb(i)))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		closeErr = e.p.Close(ctx)
		took = time.Since(start)
	})
	require.ErrorIs(t, closeErr, context.DeadlineExceeded)
	assert.Less(t, took, 2*time.Second, "Close returned %v after its ctx ended", took)

	rec.wait(t)
	for i := range later {
		o := rec.get(i)
		assert.Equal(t, 1, o.n, "message %d: callbacks", i)
		assert.ErrorIs(t, o.err, core.ErrClosed, "message %d", i)
	}
	watchdog(t, 5*time.Second, "a second Close", func() {
		assert.NoError(t, e.p.Close(context.Background()), "a later Close waits for the end")
	})

	t.Run("Drained", func(t *testing.T) {
		e := newEnv(t)
		var closeErr error
		inCallback(t, e.p, 5*time.Second, func() {
			_, err := e.p.Send(context.Background(), &core.Message{Payload: []byte("x")})
			assert.NoError(t, err)
			closeErr = e.p.Close(context.Background())
			assert.NoError(t, e.p.Close(context.Background()), "Close again from the callback")
		})
		assert.NoError(t, closeErr, "nothing was pending: Close from a callback succeeds")
		watchdog(t, 5*time.Second, "Close after the callback", func() {
			assert.NoError(t, e.p.Close(context.Background()))
		})
		assert.ErrorIs(t, e.p.SendAsync(context.Background(), &core.Message{}, func(core.MessageID, *core.Message, error) {}), core.ErrClosed)
	})
}

// TestCloseWhileCallbackBlocksReturnsByContext: Close from another
// goroutine while a callback blocks returns shortly after its ctx ended;
// the blocked callback and the rest run afterwards.
func TestCloseWhileCallbackBlocksReturnsByContext(t *testing.T) {
	e := newEnv(t)
	release := blockCallbacks(t, e.p)
	rec := newRecorder(3)
	for i := range 3 {
		require.NoError(t, e.p.SendAsync(context.Background(), &core.Message{Payload: payload(i)}, rec.cb(i)))
	}
	watchdog(t, 5*time.Second, "Close with a 200ms ctx", func() {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		assert.ErrorIs(t, e.p.Close(ctx), context.DeadlineExceeded)
		// The blocked callback is noticed within 200ms past ctx.
		assert.Less(t, time.Since(start), 700*time.Millisecond)
	})
	close(release)
	rec.wait(t)
	for i := range 3 {
		assert.Equal(t, 1, rec.get(i).n, "message %d", i)
	}
	watchdog(t, 5*time.Second, "Close after release", func() { assert.NoError(t, e.p.Close(context.Background())) })
}

// TestSendInsideCallbackReturnsByDeadline: Send from a callback returns
// with its message's outcome: stored when the broker answers, ErrTimeout
// by SendTimeout when it does not; later callbacks keep running.
func TestSendInsideCallbackReturnsByDeadline(t *testing.T) {
	const timeout = 300 * time.Millisecond
	e := newEnv(t, core.SendTimeout(timeout))
	inCallback(t, e.p, 5*time.Second, func() {
		id, err := e.p.Send(context.Background(), &core.Message{Payload: []byte("inner")})
		assert.NoError(t, err)
		assert.NotZero(t, id)
	})

	var took time.Duration
	var sendErr error
	inCallback(t, e.p, 5*time.Second, func() {
		e.dialer.DropReceipts(true)
		start := time.Now()
		_, sendErr = e.p.Send(context.Background(), &core.Message{Payload: []byte("lost")})
		took = time.Since(start)
	})
	assert.ErrorIs(t, sendErr, core.ErrTimeout)
	assert.GreaterOrEqual(t, took, timeout-time.Millisecond, "never early")
	assert.Less(t, took, timeout+time.Second, "by its deadline")

	t.Run("ContextDeadline", func(t *testing.T) {
		inCallback(t, e.p, 5*time.Second, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			_, err := e.p.Send(ctx, &core.Message{Payload: []byte("ctx")})
			assert.ErrorIs(t, err, context.DeadlineExceeded)
		})
	})

	// Outside callbacks: a blocked callback does not hold Send past its bound.
	t.Run("WhileCallbackBlocks", func(t *testing.T) {
		defer close(blockCallbacks(t, e.p))
		watchdog(t, 5*time.Second, "Send while a callback blocks", func() {
			start := time.Now()
			_, err := e.p.Send(context.Background(), &core.Message{Payload: []byte("x")})
			assert.ErrorIs(t, err, core.ErrTimeout)
			assert.Less(t, time.Since(start), timeout+time.Second)
		})
	})
}

// TestFlushInsideCallbackReturnsByContext: Flush from a callback cannot
// wait for itself: it returns ErrInCallback at once, whatever its ctx.
func TestFlushInsideCallbackReturnsByContext(t *testing.T) {
	e := newEnv(t)
	rec := newRecorder(1)
	inCallback(t, e.p, 5*time.Second, func() {
		e.dialer.DropReceipts(true)
		require.NoError(t, e.p.SendAsync(context.Background(), &core.Message{Payload: []byte("queued")}, rec.cb(0)))
		start := time.Now()
		assert.ErrorIs(t, e.p.Flush(context.Background()), core.ErrInCallback)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		assert.ErrorIs(t, e.p.Flush(ctx), core.ErrInCallback)
		assert.Less(t, time.Since(start), 500*time.Millisecond)
	})
	e.dialer.DropReceipts(false)
	e.dialer.DropConnections() // the resend is acknowledged
	rec.wait(t)
	assert.NoError(t, rec.get(0).err)

	// Outside a callback, a blocked callback bounds Flush only by its ctx.
	defer close(blockCallbacks(t, e.p))
	watchdog(t, 5*time.Second, "Flush while a callback blocks", func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		assert.ErrorIs(t, e.p.Flush(ctx), context.DeadlineExceeded)
	})
}

// TestCallbackGoexitDoesNotStopDispatcher: a callback that ends its
// goroutine (runtime.Goexit, as t.FailNow does) is reported, and every
// later callback runs exactly once, in order; Close still finishes.
func TestCallbackGoexitDoesNotStopDispatcher(t *testing.T) {
	e := newEnv(t)
	const n = 200
	rec := newRecorder(n)
	for i := range n {
		cb := rec.cb(i)
		if i%50 == 10 {
			inner := cb
			cb = func(id core.MessageID, m *core.Message, err error) {
				inner(id, m, err)
				runtime.Goexit()
			}
		}
		require.NoError(t, e.p.SendAsync(context.Background(), &core.Message{Payload: payload(i)}, cb))
	}
	rec.wait(t)
	rec.mu.Lock()
	order := append([]int(nil), rec.order...)
	rec.mu.Unlock()
	for i := range n {
		assert.Equal(t, 1, rec.get(i).n, "message %d", i)
		assert.NoError(t, rec.get(i).err)
	}
	for i := 1; i < len(order); i++ {
		require.Less(t, order[i-1], order[i], "success order")
	}
	assert.Equal(t, 4, e.errs.Count(core.ErrCallbackExit), "each Goexit reported once")
	watchdog(t, 5*time.Second, "Close", func() {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		assert.NoError(t, e.p.Close(ctx))
	})
}

// TestRejectedMessageOrder: a message the broker refuses as too large is
// reported in sequence order, after the older messages, like a success.
func TestRejectedMessageOrder(t *testing.T) {
	b, err := broker.New(broker.NewMemoryStore(), broker.MaxFrameSize(4096))
	require.NoError(t, err)
	d := mem.NewDialer(b)
	defer d.Close()
	p, err := core.New(d, core.Name("small"))
	require.NoError(t, err)
	defer p.Close(context.Background())
	_, err = p.Send(context.Background(), &core.Message{Payload: []byte("connect")})
	require.NoError(t, err)
	// Receipts come late, so the older messages are still pending when the
	// pump refuses the large one.
	d.DelayReceipts(50 * time.Millisecond)
	var mu sync.Mutex
	var order []int
	done := make(chan struct{})
	const n = 6
	for i := range n {
		size := 10
		if i == 5 {
			size = 8000 // over the broker's 4 KiB frame limit
		}
		i := i
		require.NoError(t, p.SendAsync(context.Background(), &core.Message{Payload: make([]byte, size)},
			func(_ core.MessageID, _ *core.Message, err error) {
				mu.Lock()
				defer mu.Unlock()
				order = append(order, i)
				if i == 5 {
					assert.ErrorIs(t, err, core.ErrMessageTooLarge)
				} else {
					assert.NoError(t, err)
				}
				if len(order) == n {
					close(done)
				}
			}))
	}
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("callbacks did not all run")
	}
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5}, order)
}

// TestStatsUnackedExcludesResolved: messages that failed (their receipts
// were dropped until they timed out) are not counted as unacknowledged.
func TestStatsUnackedExcludesResolved(t *testing.T) {
	// On a manual clock nothing times out until the test says so: on the
	// system clock a loaded machine let the messages time out before they
	// were seen written. The window holds all of them whatever the frames.
	const timeout, n = time.Second, 10
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	e := newEnv(t, core.WithClock(clk), core.SendTimeout(timeout), core.MaxFramesInFlight(n), core.Heartbeat(time.Hour))
	_, err := e.p.Send(context.Background(), &core.Message{Payload: []byte("connect")})
	require.NoError(t, err)
	e.dialer.DropReceipts(true)
	rec := newRecorder(n)
	for i := range n {
		require.NoError(t, e.p.SendAsync(context.Background(), &core.Message{Payload: payload(i)}, rec.cb(i)))
	}
	waitUntil(t, "the messages to be written", func() bool { return e.p.Stats().Unacked == n })
	// The sweeper may arm its timer only after a first Advance (it was
	// busy with a wake-up): move the clock until it has seen the deadline.
	waitUntil(t, "the messages to time out", func() bool {
		clk.Advance(timeout)
		return e.p.Stats().TimedOut == n
	})
	rec.wait(t)
	require.NoError(t, e.p.Flush(context.Background()))
	st := e.p.Stats()
	assert.Equal(t, 0, st.Pending)
	assert.Equal(t, 0, st.Unacked, "resolved messages are not unacknowledged")
	assert.Equal(t, uint64(n), st.TimedOut)
}

// TestDeadlineNeverEarlyUnderCPULoad: with every P kept busy (the coarse
// clock's goroutine starved), no message fails with ErrTimeout before its
// SendAsync time + SendTimeout as read from the precise clock.
func TestDeadlineNeverEarlyUnderCPULoad(t *testing.T) {
	const (
		timeout = 200 * time.Millisecond
		n       = 2000
		early   = time.Millisecond
	)
	e := newEnv(t, core.SendTimeout(timeout), core.MaxPending(4*n), core.MaxPendingPerTopic(4*n))
	e.disconnect()

	stop := make(chan struct{})
	var spinners sync.WaitGroup
	for range runtime.GOMAXPROCS(0) * 2 {
		spinners.Go(func() {
			x := 0
			for {
				select {
				case <-stop:
					return
				default:
				}
				for i := range 100000 {
					x += i
				}
			}
		})
	}
	defer func() { close(stop); spinners.Wait() }()

	sent := make([]time.Time, n)
	at := make([]time.Time, n)
	errs := make([]error, n)
	var left atomic.Int64
	left.Store(n)
	done := make(chan struct{})
	for i := range n {
		sent[i] = time.Now()
		require.NoError(t, e.p.SendAsync(context.Background(), &core.Message{Payload: payload(i)},
			func(_ core.MessageID, _ *core.Message, err error) {
				at[i], errs[i] = time.Now(), err
				if left.Add(-1) == 0 {
					close(done)
				}
			}))
		if i%100 == 99 {
			time.Sleep(time.Millisecond) // spread the sends over the ticks
		}
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%d callbacks missing", left.Load())
	}
	tooEarly, worst := 0, time.Duration(0)
	for i := range n {
		require.ErrorIs(t, errs[i], core.ErrTimeout)
		if d := sent[i].Add(timeout).Sub(at[i]); d > early {
			tooEarly++
			worst = max(worst, d)
		}
	}
	t.Logf("%d messages, %d failed more than %v early (worst %v)", n, tooEarly, early, worst)
	assert.Zero(t, tooEarly, "messages failed before their deadline (worst %v early)", worst)
}

// TestBrokerLosingRecordsIsReported: a broker that comes back without the
// records it acknowledged (here a memory store lost with its process) is
// reported with ErrRecordsLost when the topic is next written; the
// producer goes on.
func TestBrokerLosingRecordsIsReported(t *testing.T) {
	e := newEnv(t)
	for range 3 {
		_, err := e.p.Send(context.Background(), &core.Message{Payload: []byte("x")})
		require.NoError(t, err)
	}
	fresh, err := broker.New(broker.NewMemoryStore())
	require.NoError(t, err)
	e.dialer.SetBroker(fresh)
	e.dialer.DropConnections()
	_, err = e.p.Send(context.Background(), &core.Message{Payload: []byte("after")})
	assert.NoError(t, err, "the producer goes on")
	waitUntil(t, "the loss to be reported", func() bool { return e.errs.Has(core.ErrRecordsLost) })
	assert.ErrorIs(t, e.p.Flush(nil), core.ErrNilContext) //nolint:staticcheck // a nil context on purpose
}
