package core_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/clock"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/transport/mem"
	"github.com/inflightmq/inflight/wire"
)

func TestNewRejectsBadOptions(t *testing.T) {
	b, _ := broker.New(broker.NewMemoryStore())
	d := mem.NewDialer(b)
	defer d.Close()
	_, err := core.New(nil)
	assert.ErrorIs(t, err, core.ErrInvalidOption)

	for name, opt := range map[string]core.Option{
		"nil option":               nil,
		"zero SendTimeout":         core.SendTimeout(0),
		"negative SendTimeout":     core.SendTimeout(-time.Second),
		"zero MaxPending":          core.MaxPending(0),
		"negative MaxPending":      core.MaxPending(-1),
		"zero MaxPendingPerTopic":  core.MaxPendingPerTopic(0),
		"zero MaxPendingBytes":     core.MaxPendingBytes(0),
		"zero per-topic bytes":     core.MaxPendingBytesPerTopic(0),
		"nil MemoryLimit":          core.WithMemoryLimit(nil),
		"zero TopicIdleTimeout":    core.TopicIdleTimeout(0),
		"empty Name":               core.Name(""),
		"long Name":                core.Name(strings.Repeat("x", 256)),
		"zero backoff":             core.ReconnectBackoff(0, time.Second),
		"inverted backoff":         core.ReconnectBackoff(time.Second, time.Millisecond),
		"zero DialTimeout":         core.DialTimeout(0),
		"zero HandshakeTimeout":    core.HandshakeTimeout(0),
		"zero MaxBatchMessages":    core.MaxBatchMessages(0),
		"tiny MaxBatchBytes":       core.MaxBatchBytes(10),
		"tiny MaxFrameSize":        core.MaxFrameSize(100),
		"huge MaxFrameSize":        core.MaxFrameSize(1 << 31),
		"nil clock":                core.WithClock(nil),
		"nil ErrorHandler":         core.ErrorHandler(nil),
		"negative MaxPendingBytes": core.MaxPendingBytes(-1),
	} {
		t.Run(name, func(t *testing.T) {
			p, err := core.New(d, opt)
			assert.ErrorIs(t, err, core.ErrInvalidOption)
			assert.Nil(t, p)
		})
	}
}

func TestSendRejectsBadInput(t *testing.T) {
	e := newEnv(t, core.MaxFrameSize(wire.MinMaxFrameSize*4))
	called := false
	cb := func(core.MessageID, *core.Message, error) { called = true }
	ctx := context.Background()
	assert.ErrorIs(t, e.p.SendAsync(nil, &core.Message{}, cb), core.ErrNilContext)
	assert.ErrorIs(t, e.p.SendAsync(ctx, nil, cb), core.ErrNilMessage)
	assert.ErrorIs(t, e.p.SendAsync(ctx, &core.Message{}, nil), core.ErrNilCallback)
	assert.ErrorIs(t, e.p.TrySendAsync(ctx, nil, cb), core.ErrNilMessage)
	_, err := e.p.Send(ctx, nil)
	assert.ErrorIs(t, err, core.ErrNilMessage)

	big := make([]byte, e.p.MaxMessageSize()+1)
	assert.ErrorIs(t, e.p.SendAsync(ctx, &core.Message{Payload: big}, cb), core.ErrMessageTooLarge)
	_, err = e.p.Send(ctx, &core.Message{Payload: big[:e.p.MaxMessageSize()]})
	assert.NoError(t, err, "the largest message fits in a frame")
	_, err = e.p.Send(ctx, &core.Message{})
	assert.NoError(t, err, "an empty message is a message")
	require.NoError(t, e.p.Flush(ctx))
	assert.False(t, called, "no callback for a refused message")
}

// TestBrokerLowersFrameLimit: a message the producer accepts but the
// connected broker cannot take fails with ErrMessageTooLarge and does not
// block the messages behind it.
func TestBrokerLowersFrameLimit(t *testing.T) {
	store := broker.NewMemoryStore()
	b, err := broker.New(store, broker.MaxFrameSize(4096))
	require.NoError(t, err)
	d := mem.NewDialer(b)
	defer d.Close()
	p, err := core.New(d, core.Name("small"))
	require.NoError(t, err)
	defer p.Close(context.Background())

	ctx := context.Background()
	_, err = p.Send(ctx, &core.Message{Payload: make([]byte, 8000)})
	assert.ErrorIs(t, err, core.ErrMessageTooLarge)
	_, err = p.Send(ctx, &core.Message{Payload: []byte("small")})
	assert.NoError(t, err)
	assert.Equal(t, 1, store.Len("small"))
}

// TestCallbackPanicIsRecovered: a panicking callback is reported to the
// ErrorHandler and the dispatcher goes on.
func TestCallbackPanicIsRecovered(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	require.NoError(t, e.p.SendAsync(ctx, &core.Message{}, func(core.MessageID, *core.Message, error) { panic("boom") }))
	_, err := e.p.Send(ctx, &core.Message{Payload: []byte("next")})
	require.NoError(t, err)
	require.NoError(t, e.p.Flush(ctx)) // Send does not wait for earlier callbacks
	assert.True(t, e.errs.Has(core.ErrCallbackPanic), "panic reported: %v", e.errs.Snapshot())
}

// TestTimeoutWithManualClock drives SendTimeout with a manual clock: the
// message resolves when the clock passes its deadline, and no real time
// needs to pass.
func TestTimeoutWithManualClock(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	b, _ := broker.New(broker.NewMemoryStore())
	d := mem.NewDialer(b)
	defer d.Close()
	d.RefuseDials(true)
	p, err := core.New(d, core.WithClock(clk), core.SendTimeout(time.Hour), core.ReconnectBackoff(time.Hour, time.Hour))
	require.NoError(t, err)
	defer p.Close(context.Background())

	rec := newRecorder(1)
	require.NoError(t, p.SendAsync(context.Background(), &core.Message{}, rec.cb(0)))
	// The sweeper's timer and the pump's backoff timer are armed.
	require.True(t, clk.WaitTimers(2, nil))
	clk.Advance(time.Hour)
	rec.wait(t)
	assert.ErrorIs(t, rec.get(0).err, core.ErrTimeout)
}
