package core_test

import (
	"context"
	"errors"
	"strings"
	"sync"
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

// lateTolerance is how late after its deadline a message may be reported
// on the real clock. It measures the scheduler of a loaded host (these tests
// run under -race beside other packages), not the producer: the Pulsar bug
// it guards against is a timeout that never fires. That expiry needs no
// time beyond the deadline is checked on the manual clock
// (TestTimeoutsFireAtTheDeadlineWhileDisconnected); that it is never early
// is checked here without any tolerance.
const lateTolerance = 500 * time.Millisecond

// disconnect cuts the producer off: the broker refuses dials and every open
// connection drops.
func (e *env) disconnect() {
	e.dialer.RefuseDials(true)
	e.dialer.DropConnections()
}

// TestSendAsyncTimesOutWhileDisconnected is the Pulsar bug: with the broker
// gone, messages handed to SendAsync must still time out on time, including
// three times more messages than fit in the queue.
func TestSendAsyncTimesOutWhileDisconnected(t *testing.T) {
	const maxPending, timeout, senders = 64, 150 * time.Millisecond, 4
	t.Run("BlockIfFull", func(t *testing.T) {
		e := newEnv(t, core.MaxPending(maxPending), core.MaxPendingPerTopic(maxPending), core.SendTimeout(timeout))
		_, err := e.p.Send(context.Background(), &core.Message{Payload: []byte("first")})
		require.NoError(t, err)
		require.NoError(t, e.p.Flush(context.Background())) // its slot is released
		e.disconnect()

		const n = 3 * maxPending
		rec := newRecorder(n)
		type returned struct {
			err          error
			start, after time.Time
		}
		var mu sync.Mutex
		starts := make(map[int]time.Time)
		rets := make(map[int]returned)
		var wg sync.WaitGroup
		for s := range senders {
			wg.Go(func() {
				for i := s; i < n; i += senders {
					start := time.Now()
					err := e.p.SendAsync(context.Background(), &core.Message{Payload: payload(i)}, rec.cb(i))
					after := time.Now()
					mu.Lock()
					starts[i] = start
					if err != nil {
						rets[i] = returned{err, start, after}
					}
					mu.Unlock()
					if err != nil {
						rec.cb(i)(0, nil, err) // count it as this message's one outcome
					}
				}
			})
		}
		wg.Wait()
		rec.wait(t)
		blocked := 0
		for i := range n {
			o := rec.get(i)
			require.Equal(t, 1, o.n, "message %d: outcomes", i)
			require.ErrorIs(t, o.err, core.ErrTimeout, "message %d", i)
			deadline := starts[i].Add(timeout)
			assert.False(t, o.at.Before(deadline), "message %d reported %v before its deadline", i, deadline.Sub(o.at))
			assert.False(t, o.at.After(deadline.Add(lateTolerance)), "message %d late by %v", i, o.at.Sub(deadline))
			if r, ok := rets[i]; ok {
				blocked++
				assert.False(t, r.after.Before(deadline), "SendAsync of message %d gave up %v before its deadline", i, deadline.Sub(r.after))
				assert.False(t, r.after.After(deadline.Add(lateTolerance)), "SendAsync of message %d blocked %v past its deadline", i, r.after.Sub(deadline))
			}
		}
		t.Logf("%d of %d messages timed out while waiting for room, the rest in the queue", blocked, n)
		assert.Equal(t, uint64(n-blocked), e.p.Stats().TimedOut)
		// Pending counts a message until its slot is released, which the
		// dispatcher does after its callback.
		waitUntil(t, "every slot to be released", func() bool { return e.p.Stats().Pending == 0 })

		// The broker comes back: the ring has wrapped several times over
		// failed messages, and sending works again.
		e.dialer.RefuseDials(false)
		id, err := e.p.Send(context.Background(), &core.Message{Payload: []byte("after")})
		require.NoError(t, err)
		recs := e.store.Records("test-producer")
		require.Len(t, recs, 2, "timed-out messages were never written")
		assert.Equal(t, uint64(id), recs[1].Seq)
	})

	// On a manual clock: nothing times out (and frees room) until the
	// test moves it, so which sends fit does not depend on how fast the
	// loop runs (on a loaded host a loop slower than the timeout let a
	// message that should overflow into a slot freed by a timeout). A
	// send that waited for room, with the clock stopped, would wait until
	// its context ended: the ErrQueueFull of each overflowing send says it
	// did not wait.
	t.Run("FailFast", func(t *testing.T) {
		clk := clock.NewManual(time.Unix(1_000_000, 0))
		e := newEnv(t, core.WithClock(clk), core.MaxPending(maxPending), core.MaxPendingPerTopic(maxPending),
			core.SendTimeout(timeout), core.BlockIfFull(false), core.Heartbeat(time.Hour))
		_, err := e.p.Send(context.Background(), &core.Message{Payload: []byte("first")})
		require.NoError(t, err)
		require.NoError(t, e.p.Flush(context.Background())) // its slot is released
		e.disconnect()

		const n = 3 * maxPending
		rec := newRecorder(maxPending)
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout) // bounds a send that would wait
		defer cancel()
		full := 0
		for i := range n {
			err := e.p.SendAsync(ctx, &core.Message{Payload: payload(i)}, rec.cb(i))
			if i < maxPending {
				require.NoError(t, err, "message %d fits", i)
				continue
			}
			require.ErrorIs(t, err, core.ErrQueueFull, "message %d overflows, at once", i)
			full++
		}
		assert.Equal(t, 2*maxPending, full)
		clk.Advance(timeout - time.Nanosecond)
		rec.mu.Lock()
		assert.Zero(t, rec.got, "reported before the deadline")
		rec.mu.Unlock()
		// The deadline, and on: the sweeper may arm its timer only after an
		// Advance (it was busy with a wake-up), so move on until it has.
		clk.Advance(time.Nanosecond)
		waitUntil(t, "the queued messages to time out", func() bool {
			select {
			case <-rec.done:
				return true
			default:
				clk.Advance(time.Millisecond)
				return false
			}
		})
		for i := range maxPending {
			assert.ErrorIs(t, rec.get(i).err, core.ErrTimeout, "message %d", i)
		}
	})
}

// TestTimeoutsFireAtTheDeadlineWhileDisconnected is the Pulsar bug on the
// manual clock: with the broker unreachable from the start, queued messages
// and senders waiting for room all time out when the clock reaches their
// deadline, with no further tick, and not one tick before.
func TestTimeoutsFireAtTheDeadlineWhileDisconnected(t *testing.T) {
	const maxPending, blocked, timeout = 8, 2, 150 * time.Millisecond
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	t0 := clk.Now()
	b, err := broker.New(broker.NewMemoryStore())
	require.NoError(t, err)
	d := mem.NewDialer(b)
	defer d.Close()
	d.RefuseDials(true)
	p, err := core.New(d, core.Name("unreachable"), core.WithClock(clk), core.SendTimeout(timeout),
		core.MaxPending(maxPending), core.MaxPendingPerTopic(maxPending), core.ReconnectBackoff(time.Hour, time.Hour), core.Heartbeat(time.Hour))
	require.NoError(t, err)
	defer testkit.CloseProducer(t, p, time.Second)

	// Armed now: the sweeper's timer and the pump's backoff after its
	// refused dial.
	const idle = 2
	waitTimers := func(n int) {
		t.Helper()
		watchdog := make(chan struct{})
		defer time.AfterFunc(waitTimeout, func() { close(watchdog) }).Stop()
		require.True(t, clk.WaitTimers(n, watchdog), "waiting for %d timers", n)
	}
	waitTimers(idle)

	var mu sync.Mutex
	var reported []time.Time // clock readings in the callbacks
	for i := range maxPending {
		require.NoError(t, p.SendAsync(context.Background(), &core.Message{Payload: payload(i)},
			func(_ core.MessageID, _ *core.Message, err error) {
				assert.ErrorIs(t, err, core.ErrTimeout)
				mu.Lock()
				reported = append(reported, clk.Now())
				mu.Unlock()
			}))
	}
	senders := make(chan error, blocked)
	for range blocked {
		go func() {
			senders <- p.SendAsync(context.Background(), &core.Message{}, func(core.MessageID, *core.Message, error) {
				t.Error("a sender that timed out waiting for room got a callback")
			})
		}()
	}
	waitTimers(idle + blocked) // both senders wait for room, on the clock

	clk.Advance(timeout - time.Nanosecond)
	mu.Lock()
	assert.Empty(t, reported, "reported before the deadline")
	mu.Unlock()
	assert.Empty(t, senders, "a sender gave up before its deadline")

	clk.Advance(time.Nanosecond) // exactly the deadline; the clock stops here
	for range blocked {
		select {
		case err := <-senders:
			assert.ErrorIs(t, err, core.ErrTimeout)
		case <-time.After(waitTimeout):
			t.Fatal("a sender waiting for room outlived its deadline")
		}
	}
	waitUntil(t, "every queued message to be reported", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(reported) == maxPending
	})
	for i, at := range reported {
		assert.Equal(t, t0.Add(timeout), at, "callback %d", i)
	}
	assert.Equal(t, uint64(maxPending), p.Stats().TimedOut)
	waitUntil(t, "every slot to be released", func() bool { return p.Stats().Pending == 0 })
}

// TestContextCancelResolvesPromptly checks that a message's context ends
// its life at once, connected or not, and that a message canceled before it
// was written never reaches the broker.
func TestContextCancelResolvesPromptly(t *testing.T) {
	e := newEnv(t, core.SendTimeout(time.Minute))
	_, err := e.p.Send(context.Background(), &core.Message{Payload: []byte("first")})
	require.NoError(t, err)
	e.disconnect()

	rec := newRecorder(2)
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, e.p.SendAsync(ctx, &core.Message{Payload: []byte("canceled")}, rec.cb(0)))
	tctx, tcancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer tcancel()
	deadline, _ := tctx.Deadline()
	require.NoError(t, e.p.SendAsync(tctx, &core.Message{Payload: []byte("deadline")}, rec.cb(1)))
	canceledAt := time.Now()
	cancel()
	rec.wait(t)

	o := rec.get(0)
	assert.ErrorIs(t, o.err, context.Canceled)
	assert.Less(t, o.at.Sub(canceledAt), lateTolerance)
	o = rec.get(1)
	assert.ErrorIs(t, o.err, context.DeadlineExceeded)
	assert.False(t, o.at.After(deadline.Add(lateTolerance)), "late by %v", o.at.Sub(deadline))
	assert.Equal(t, uint64(2), e.p.Stats().Canceled)

	// A context already done is refused up front.
	assert.ErrorIs(t, e.p.SendAsync(ctx, &core.Message{}, rec.cb(9)), context.Canceled)

	// Reconnect: the canceled messages must not be written.
	e.dialer.RefuseDials(false)
	_, err = e.p.Send(context.Background(), &core.Message{Payload: []byte("after")})
	require.NoError(t, err)
	var got []string
	for _, r := range e.store.Records("test-producer") {
		got = append(got, string(r.Payload))
	}
	assert.Equal(t, []string{"first", "after"}, got)
}

// TestSendBlockedUntilContextEnds: a sender waiting for room returns its
// context's error when the context ends, long before SendTimeout.
func TestSendBlockedUntilContextEnds(t *testing.T) {
	e := newEnv(t, core.MaxPending(1), core.MaxPendingPerTopic(1), core.SendTimeout(time.Minute))
	e.disconnect()
	rec := newRecorder(1)
	require.NoError(t, e.p.SendAsync(context.Background(), &core.Message{}, rec.cb(0)))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := e.p.SendAsync(ctx, &core.Message{}, rec.cb(1))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 20*time.Millisecond+lateTolerance)
	assert.True(t, errors.Is(e.p.TrySendAsync(context.Background(), &core.Message{}, rec.cb(2)), core.ErrQueueFull))
}

// deadlineCtx is a context whose deadline passes when the test says so:
// Done closes at expire, and Err is then context.DeadlineExceeded, as for
// a context.WithDeadline whose time came.
type deadlineCtx struct {
	context.Context
	done chan struct{}
}

func newDeadlineCtx() *deadlineCtx {
	return &deadlineCtx{Context: context.Background(), done: make(chan struct{})}
}

func (c *deadlineCtx) Done() <-chan struct{} { return c.done }
func (c *deadlineCtx) expire()               { close(c.done) }

func (c *deadlineCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// TestContextDeadlineIsTimeoutWithCause: a message whose context's
// deadline passes while the broker is unreachable fails as one whose
// SendTimeout elapsed does: errors.Is matches ErrTimeout, and the
// context's error, and the last connection failure, which the text names.
// So does Send, and a send that waited for room until its deadline.
func TestContextDeadlineIsTimeoutWithCause(t *testing.T) {
	e := newEnv(t, core.SendTimeout(time.Minute), core.MaxPending(2), core.MaxPendingPerTopic(2))
	_, err := e.p.Send(context.Background(), &core.Message{Payload: []byte("first")})
	require.NoError(t, err)
	require.NoError(t, e.p.Flush(context.Background()))
	e.disconnect()
	// Two refused dials: the last connection failure is a refused dial from
	// the first on, whatever the pump does next.
	waitUntil(t, "two refused dials", func() bool { return e.errs.Count(mem.ErrRefused) >= 2 })

	check := func(what string, err error) {
		t.Helper()
		assert.ErrorIs(t, err, core.ErrTimeout, what)
		assert.ErrorIs(t, err, context.DeadlineExceeded, what)
		assert.ErrorIs(t, err, mem.ErrRefused, what+": the last connection failure")
		assert.True(t, strings.HasPrefix(err.Error(), "inflight: send timed out: context deadline exceeded; last connection failure: dial failed: "),
			"%s: %q", what, err)
	}

	async, inSend := newDeadlineCtx(), newDeadlineCtx()
	done := make(chan error, 1)
	require.NoError(t, e.p.SendAsync(async, &core.Message{Payload: []byte("async")},
		func(_ core.MessageID, _ *core.Message, err error) { done <- err }))
	sent := make(chan error, 1)
	go func() {
		_, err := e.p.Send(inSend, &core.Message{Payload: []byte("sync")})
		sent <- err
	}()
	waitUntil(t, "both messages pending", func() bool { return e.p.Stats().Pending == 2 })

	// The queue is full: a third send waits for room until its deadline
	// (or, if it comes after it, is refused up front: the same error).
	blocked := newDeadlineCtx()
	refused := make(chan error, 1)
	go func() {
		refused <- e.p.SendAsync(blocked, &core.Message{}, func(core.MessageID, *core.Message, error) {
			t.Error("a send refused for its deadline got a callback")
		})
	}()
	require.ErrorIs(t, e.p.TrySendAsync(context.Background(), &core.Message{}, func(core.MessageID, *core.Message, error) {}), core.ErrQueueFull)
	blocked.expire()
	check("SendAsync waiting for room", testkit.WaitChan(t, refused, "the blocked SendAsync"))

	async.expire()
	check("callback", testkit.WaitChan(t, done, "the callback"))
	inSend.expire()
	check("Send", testkit.WaitChan(t, sent, "Send"))

	// A deadline that passed before the call is refused the same way.
	check("SendAsync after the deadline", e.p.SendAsync(async, &core.Message{}, func(core.MessageID, *core.Message, error) {}))
	// Counted by the callback goroutine, after Send returned.
	waitUntil(t, "both counted as canceled", func() bool { return e.p.Stats().Canceled == 2 })
	assert.Zero(t, e.p.Stats().TimedOut)
}
