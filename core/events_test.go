package core_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/transport/mem"
)

// eventLog collects a producer's events for a test.
type eventLog struct {
	ch chan core.Event
}

func newEventLog() *eventLog { return &eventLog{ch: make(chan core.Event, 1024)} }

func (l *eventLog) add(ev core.Event) { l.ch <- ev }

// next returns the next event, failing the test if none comes in time.
func (l *eventLog) next(t *testing.T) core.Event {
	t.Helper()
	select {
	case ev := <-l.ch:
		return ev
	case <-time.After(waitTimeout):
		t.Fatal("no event")
		return core.Event{}
	}
}

// skipDialFailures returns the next event that is not a dial failure.
func (l *eventLog) skipDialFailures(t *testing.T) core.Event {
	t.Helper()
	for {
		if ev := l.next(t); ev.Kind != core.EventDialFailed {
			return ev
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestConnectionEvents: connect, cut, reconnect, refused dials, reconnect,
// close: the events come in that order, with their causes, and the Logger
// writes them.
func TestConnectionEvents(t *testing.T) {
	b, err := broker.New(broker.NewMemoryStore())
	require.NoError(t, err)
	d := mem.NewDialer(b)
	defer d.Close()
	events := newEventLog()
	var logs syncBuffer
	p, err := core.New(d, core.Name("evented"), core.Topic("t1"),
		core.ReconnectBackoff(time.Millisecond, 5*time.Millisecond),
		core.OnEvent(events.add),
		core.Logger(slog.New(slog.NewTextHandler(&logs, nil))))
	require.NoError(t, err)

	ev := events.next(t)
	require.Equal(t, core.EventConnected, ev.Kind, "first event: %+v", ev)
	assert.False(t, ev.Reconnect)
	assert.NoError(t, ev.Err)
	assert.False(t, ev.Time.IsZero())
	for range 3 {
		_, err := p.Send(context.Background(), &core.Message{Payload: []byte("x")})
		require.NoError(t, err)
	}

	d.DropConnections()
	ev = events.next(t)
	require.Equal(t, core.EventDisconnected, ev.Kind, "%+v", ev)
	assert.Error(t, ev.Err, "the cause")
	ev = events.skipDialFailures(t)
	require.Equal(t, core.EventConnected, ev.Kind, "%+v", ev)
	assert.True(t, ev.Reconnect)

	d.RefuseDials(true)
	d.DropConnections()
	ev = events.next(t)
	require.Equal(t, core.EventDisconnected, ev.Kind, "%+v", ev)
	ev = events.next(t)
	require.Equal(t, core.EventDialFailed, ev.Kind, "%+v", ev)
	assert.ErrorIs(t, ev.Err, mem.ErrRefused)
	d.RefuseDials(false)
	ev = events.skipDialFailures(t)
	require.Equal(t, core.EventConnected, ev.Kind, "%+v", ev)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, p.Close(ctx))
	ev = events.next(t)
	require.Equal(t, core.EventDisconnected, ev.Kind, "%+v", ev)
	assert.ErrorIs(t, ev.Err, core.ErrClosed, "the last event: closed by Close")
	select {
	case ev := <-events.ch:
		t.Fatalf("an event after Close returned: %+v", ev)
	default:
	}

	out := logs.String()
	assert.Contains(t, out, `msg="inflight: connected" producer=evented topic=t1 epoch=1 reconnect=true`)
	assert.Contains(t, out, `level=WARN msg="inflight: dial failed"`)
	assert.Contains(t, out, `level=WARN msg="inflight: connection lost"`)
}

// TestEventHandlerDoesNotBlockProducer: a handler that blocks delays only
// later events; messages keep flowing, and Close returns by its ctx.
func TestEventHandlerDoesNotBlockProducer(t *testing.T) {
	b, err := broker.New(broker.NewMemoryStore())
	require.NoError(t, err)
	d := mem.NewDialer(b)
	defer d.Close()
	release := make(chan struct{})
	var once sync.Once
	p, err := core.New(d, core.OnEvent(func(core.Event) { <-release }))
	require.NoError(t, err)
	defer once.Do(func() { close(release) })
	for range 100 {
		_, err := p.Send(context.Background(), &core.Message{Payload: []byte("x")})
		require.NoError(t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	assert.True(t, errors.Is(p.Close(ctx), context.DeadlineExceeded), "Close is bounded by its ctx")
	once.Do(func() { close(release) })
	require.NoError(t, p.Close(context.Background()))
}

// TestRandomNameWarned: a producer given no Name warns to its Logger that
// its name is random, so deduplication ends with the process; one given a
// Name does not.
func TestRandomNameWarned(t *testing.T) {
	b, err := broker.New(broker.NewMemoryStore())
	require.NoError(t, err)
	d := mem.NewDialer(b)
	defer d.Close()
	for _, named := range []bool{false, true} {
		var logs syncBuffer
		opts := []core.Option{core.Logger(slog.New(slog.NewTextHandler(&logs, nil)))}
		if named {
			opts = append(opts, core.Name("stable"))
		}
		p, err := core.New(d, opts...)
		require.NoError(t, err)
		testkit.CloseProducer(t, p, time.Second)
		if named {
			assert.NotContains(t, logs.String(), "random")
			continue
		}
		assert.Contains(t, logs.String(), `level=WARN msg="inflight: no Name given: the producer name is random`)
		assert.Contains(t, logs.String(), "producer="+p.Name())
	}
}
