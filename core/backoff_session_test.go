package core_test

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/inflightmq/inflight/wire"
)

// appendFails is a Store whose Append always fails: the broker accepts
// every HELLO and TOPIC and ends the topic at its first BATCH.
type appendFails struct {
	*broker.MemoryStore
	calls atomic.Int64
}

func (a *appendFails) Append(string, string, uint64, []broker.Record) error {
	a.calls.Add(1)
	return errors.New("disk on fire")
}

// TestBackoffAfterFailedSession: a topic whose store fails right after its
// declaration is declared again with the backoff, not in a loop: at most
// one Append per the backoff's min, however fast the store fails, and the
// connection stays up for the other topics.
func TestBackoffAfterFailedSession(t *testing.T) {
	store := &appendFails{MemoryStore: broker.NewMemoryStore()}
	b, err := broker.New(store)
	require.NoError(t, err)
	d := mem.NewDialer(b)
	const backoffMin = 5 * time.Millisecond
	start := time.Now()
	p, errs := testkit.NewProducer(t, d, d.Close, "backoff-test",
		core.ReconnectBackoff(backoffMin, 40*time.Millisecond), core.SendTimeout(time.Minute))
	require.NoError(t, p.SendAsync(context.Background(), &core.Message{Payload: []byte("never stored")},
		func(core.MessageID, *core.Message, error) {}))

	const tries = 10
	waitUntil(t, "appends to fail", func() bool { return store.calls.Load() >= tries })
	calls, took := store.calls.Load(), time.Since(start) // calls first: took is then an upper bound
	assert.LessOrEqual(t, calls, int64(took/backoffMin)+1, "%d appends in %v", calls, took)
	assert.Equal(t, 1, d.Dials(), "the connection stayed up")
	assert.NotNil(t, errs.Find(func(err error) bool {
		var re *wire.RemoteError
		return errors.As(err, &re) && re.Code == wire.CodeStore
	}), "the broker's TOPIC_ERROR that ended the topic is reported")
	t.Logf("%d appends in %v", calls, took)
}

// TestReconnectWithinASecondOfReturn: with the default ReconnectBackoff, a
// producer whose broker was away long enough for the backoff to reach its
// bound dials at least once a second, so it is connected again within a
// second of the broker's return (Kafka's clients cap their reconnect
// backoff at 1 s; it was 5 s here). On the manual clock: each step moves
// the clock one second once the pump sleeps, and the next dial must come.
func TestReconnectWithinASecondOfReturn(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	b, err := broker.New(broker.NewMemoryStore())
	require.NoError(t, err)
	d := mem.NewDialer(b)
	events := make(chan core.Event, 1024)
	defer d.Close()
	p, err := core.New(d, core.Name("returns"), core.WithClock(clk), // the default ReconnectBackoff
		core.SendTimeout(time.Hour), core.Heartbeat(time.Hour), // their timers never fire here
		core.OnEvent(func(ev core.Event) { events <- ev }))
	require.NoError(t, err)
	defer testkit.CloseProducer(t, p, time.Second)
	watchdog := make(chan struct{})
	defer time.AfterFunc(waitTimeout, func() { close(watchdog) }).Stop()
	next := func(kind core.EventKind, what string) {
		t.Helper()
		for {
			select {
			case ev := <-events:
				if ev.Kind == kind {
					return
				}
			case <-watchdog:
				t.Fatalf("no %v: %s", kind, what)
			}
		}
	}
	// The pump sleeps: its backoff's timer is armed beside the sweeper's.
	sleeping := func() {
		t.Helper()
		require.True(t, clk.WaitTimers(2, watchdog), "the pump never slept")
	}
	next(core.EventConnected, "the first connection")

	d.RefuseDials(true) // the broker is gone...
	d.DropConnections()
	next(core.EventDisconnected, "the connection cut")
	// ...for as long as twelve waits: 50ms doubled twelve times is far
	// beyond any bound.
	for i := range 12 {
		sleeping()
		clk.Advance(time.Second)
		next(core.EventDialFailed, fmt.Sprintf("dial %d came more than a second after the one before", i+1))
	}

	d.RefuseDials(false) // ...and back
	sleeping()
	clk.Advance(time.Second)
	next(core.EventConnected, "not connected within a second of the broker's return")
}
