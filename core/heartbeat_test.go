package core_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/clock"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/transport/mem"
	"github.com/inflightmq/inflight/wire"
)

// TestHeartbeatDetectsSilentBroker: a broker that stops reading (and so
// stops answering PINGs) is declared dead after two heartbeat intervals,
// and the producer dials again and delivers.
func TestHeartbeatDetectsSilentBroker(t *testing.T) {
	e := newEnv(t, core.Heartbeat(20*time.Millisecond), core.SendTimeout(time.Minute))
	_, err := e.p.Send(context.Background(), &core.Message{Payload: []byte("first")})
	require.NoError(t, err)

	e.dialer.StallWrites(true)
	waitUntil(t, "a heartbeat failure", func() bool { return e.errs.Has(core.ErrHeartbeat) })
	e.dialer.StallWrites(false)
	_, err = e.p.Send(context.Background(), &core.Message{Payload: []byte("second")})
	require.NoError(t, err)
	require.GreaterOrEqual(t, e.dialer.Dials(), 2)
}

// TestIdleConnectionStaysUp: an idle but healthy connection answers PINGs
// and is not torn down. On a manual clock: each step moves it one heartbeat
// interval once the heartbeat's timer is armed, which makes the producer
// PING, and waits for the PONG before the next (on the system clock a
// loaded host could delay a PONG, or the heartbeat's own wake-up, past the
// two intervals of silence that end a connection).
func TestIdleConnectionStaysUp(t *testing.T) {
	const interval = 150 * time.Millisecond
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	b, err := broker.New(broker.NewMemoryStore())
	require.NoError(t, err)
	d := mem.NewDialer(b)
	w := &pingWatch{Dialer: d}
	errs := &testkit.ErrLog{}
	p, err := core.New(w, core.Name("idle"), core.WithClock(clk), core.Heartbeat(interval), core.ErrorHandler(errs.Add))
	require.NoError(t, err)
	t.Cleanup(func() {
		testkit.CloseProducer(t, p, time.Second)
		_ = d.Close()
	})
	_, err = p.Send(context.Background(), &core.Message{})
	require.NoError(t, err)

	watchdog := make(chan struct{})
	defer time.AfterFunc(waitTimeout, func() { close(watchdog) }).Stop()
	// Connected and idle, the producer has three timers armed: the
	// sweeper's, the parked pump's and the heartbeat's.
	const idle = 3
	const steps = 6 // six heartbeat intervals
	for i := range int64(steps) {
		require.True(t, clk.WaitTimers(idle, watchdog), "interval %d: the heartbeat's timer was never armed", i)
		clk.Advance(interval) // silent for an interval: a PING
		waitUntil(t, "the PING answered", func() bool { return w.pongs.Load() > i || errs.Has(core.ErrHeartbeat) })
		require.False(t, errs.Has(core.ErrHeartbeat), "interval %d: the idle connection was declared dead", i)
	}
	assert.EqualValues(t, steps, w.pings.Load(), "a PING per interval of silence")
	assert.Equal(t, 1, d.Dials(), "the idle connection was replaced")
	assert.Empty(t, errs.Snapshot())
}

// pingWatch wraps a Dialer and counts the PINGs written and the PONGs
// received on its connections.
type pingWatch struct {
	transport.Dialer
	pings, pongs atomic.Int64
}

func (w *pingWatch) Dial(ctx context.Context, h transport.Handler) (transport.Conn, error) {
	c, err := w.Dialer.Dial(ctx, &pongCounter{Handler: h, w: w})
	if err != nil {
		return nil, err
	}
	return &pingCounter{Conn: c, w: w}, nil
}

type pongCounter struct {
	transport.Handler
	w *pingWatch
}

// OnFrame counts a PONG once the session has taken it (and stamped its
// arrival).
func (h *pongCounter) OnFrame(frame []byte) {
	pong := false
	if typ, err := wire.TypeOf(frame); err == nil && typ == wire.TypePong {
		pong = true
	}
	h.Handler.OnFrame(frame)
	if pong {
		h.w.pongs.Add(1)
	}
}

type pingCounter struct {
	transport.Conn
	w *pingWatch
}

func (c *pingCounter) WriteFrame(buf *transport.Buffer) error {
	if typ, err := wire.TypeOf(buf.Bytes); err == nil && typ == wire.TypePing {
		c.w.pings.Add(1)
	}
	return c.Conn.WriteFrame(buf)
}
