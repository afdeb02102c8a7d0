package core_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/transport/mem"
	"github.com/inflightmq/inflight/wire"
)

// spliceDialer makes transport/mem connections Splicers: frames with
// splices are copied whole before mem hands them to the broker, and
// while hold is set every frame written is held back (with its splices)
// until release, as a socket that takes nothing holds them. It records
// each BATCH frame's splices and every Detach.
type spliceDialer struct {
	*mem.Dialer
	mu       sync.Mutex
	dials    int
	hold     bool
	held     []heldFrame
	frames   []splicedFrame
	detaches atomic.Int64
	gate     chan struct{} // set: WriteFrames waits for it to close first
	gated    atomic.Int64  // WriteFrames calls that waited for gate
}

type heldFrame struct {
	c *spliceConn
	b *transport.Buffer
}

// splicedFrame is a BATCH frame as the producer handed it over.
type splicedFrame struct {
	dial    int // 1 for the first connection
	records int
	splices int
}

type spliceConn struct {
	transport.Conn
	d    *spliceDialer
	dial int
}

func (d *spliceDialer) Dial(ctx context.Context, h transport.Handler) (transport.Conn, error) {
	c, err := d.Dialer.Dial(ctx, h)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dials++
	return &spliceConn{Conn: c, d: d, dial: d.dials}, nil
}

func (c *spliceConn) Splicing() bool { return true }

func (c *spliceConn) WriteFrames(bufs []*transport.Buffer) error {
	d := c.d
	d.mu.Lock()
	gate := d.gate
	d.mu.Unlock()
	if gate != nil {
		d.gated.Add(1)
		<-gate
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, b := range bufs {
		flat := wire.AppendFlat(nil, b.Bytes, b.Splices)
		if typ, _ := wire.TypeOf(flat); typ == wire.TypeBatch {
			if f, err := wire.DecodeBatch(flat); err == nil {
				d.frames = append(d.frames, splicedFrame{dial: c.dial, records: int(f.Count), splices: len(b.Splices)})
			}
		}
		if d.hold {
			d.held = append(d.held, heldFrame{c, b})
			continue
		}
		if err := c.write(b); err != nil {
			return err
		}
	}
	return nil
}

// write hands mem a copy of b's whole frame and releases b.
func (c *spliceConn) write(b *transport.Buffer) error {
	flat := &transport.Buffer{Bytes: wire.AppendFlat(nil, b.Bytes, b.Splices)}
	b.Release()
	return c.Conn.WriteFrame(flat)
}

// Close makes the frames held for c refer to no payload any more, as a
// Splicer's Close must (nothing reads a splice once it returned), and
// closes c.
func (c *spliceConn) Close() error {
	c.d.mu.Lock()
	for _, h := range c.d.held {
		if h.c == c {
			h.b.Flatten()
		}
	}
	c.d.mu.Unlock()
	return c.Conn.Close()
}

func (c *spliceConn) Detach() {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	for _, h := range c.d.held {
		h.b.Flatten()
	}
	c.d.detaches.Add(1)
}

// holding reports how many frames are held back, and how many of them
// still refer to memory outside their buffers.
func (d *spliceDialer) holding() (frames, spliced int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, h := range d.held {
		if len(h.b.Splices) > 0 {
			spliced++
		}
	}
	return len(d.held), spliced
}

// release stops holding frames back and writes those held, on the
// connections they were written to (drop: discards them).
func (d *spliceDialer) release(drop bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.hold = false
	for _, h := range d.held {
		if !drop {
			_ = h.c.write(h.b)
		}
	}
	d.held = nil
}

// splices sums the splices and records of the BATCH frames of dial (0:
// every connection's).
func (d *spliceDialer) splices(dial int) (splices, records int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, f := range d.frames {
		if dial == 0 || f.dial == dial {
			splices += f.splices
			records += f.records
		}
	}
	return splices, records
}

// holdAfterOne sends a message on p (its topic is then declared and its
// first frame acknowledged), and from then on d holds every frame back.
func (d *spliceDialer) holdAfterOne(t *testing.T, p *core.Producer) {
	t.Helper()
	_, err := p.Send(context.Background(), &core.Message{Payload: []byte("declared")})
	require.NoError(t, err)
	d.mu.Lock()
	d.hold = true
	d.mu.Unlock()
}

// requireStoredAsSent writes the frames d held, and checks that the
// broker stored p's first message and then want, in order: the payloads
// as they were sent, whatever their callbacks did to them.
func (d *spliceDialer) requireStoredAsSent(t *testing.T, p *core.Producer, store *broker.MemoryStore, want ...[]byte) {
	t.Helper()
	d.release(false)
	waitUntil(t, "the held frames to be stored", func() bool { return store.Len(p.Name()) == 1+len(want) })
	got := store.Records(p.Name())
	for i, w := range want {
		assert.Equal(t, w, got[1+i].Payload, "stored as sent, not as overwritten")
	}
}

func newSpliceEnv(t *testing.T, opts ...core.Option) (*core.Producer, *broker.MemoryStore, *spliceDialer) {
	t.Helper()
	store := broker.NewMemoryStore()
	b, err := broker.New(store)
	require.NoError(t, err)
	d := &spliceDialer{Dialer: mem.NewDialer(b)}
	p, _ := testkit.NewProducer(t, d, d.Close, "zero-copy", opts...)
	t.Cleanup(func() { // first: the producer's Close must not wait on a gate a failed test left shut
		d.mu.Lock()
		if d.gate != nil {
			close(d.gate)
			d.gate = nil
		}
		d.mu.Unlock()
	})
	return p, store, d
}

// big returns a payload of n bytes that names i.
func big(i, n int) []byte {
	b := bytes.Repeat([]byte{byte(i)}, n)
	copy(b, payload(i))
	return b
}

// TestZeroCopyFrames: on a Splicer, payloads of ZeroCopyMin bytes or more
// without metadata go into frames by reference, the others copied; none
// with ZeroCopyMin(0) or Compression; the broker stores every record as
// it was sent either way.
func TestZeroCopyFrames(t *testing.T) {
	msgs := []*core.Message{
		{Payload: big(0, 100)},
		{Payload: big(1, core.DefaultZeroCopyMin-1)},
		{Payload: big(2, core.DefaultZeroCopyMin)},
		{Payload: big(3, 20000)},
		{Payload: big(4, 20000), Key: []byte("k")},
		{Payload: big(5, 20000), Headers: []core.Header{{Key: "h", Value: []byte("v")}}},
		{Payload: big(6, 20000), EventTime: time.Unix(1, 0)},
	}
	for _, tc := range []struct {
		name string
		opts []core.Option
		refs int
	}{
		{"default", nil, 2},
		{"ZeroCopyMin(100)", []core.Option{core.ZeroCopyMin(100)}, 4},
		{"ZeroCopyMin(0)", []core.Option{core.ZeroCopyMin(0)}, 0},
		{"Compression", []core.Option{core.Compression(wire.CodecS2, wire.LevelFastest)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, store, d := newSpliceEnv(t, tc.opts...)
			for _, m := range msgs {
				_, err := p.Send(context.Background(), m)
				require.NoError(t, err)
			}
			splices, records := d.splices(0)
			assert.Equal(t, len(msgs), records)
			assert.Equal(t, tc.refs, splices)
			got := store.Records(p.Name())
			require.Len(t, got, len(msgs))
			for i, r := range got {
				assert.Equal(t, msgs[i].Payload, r.Payload, "record %d", i)
				assert.Equal(t, msgs[i].Key, r.Key, "record %d", i)
			}
		})
	}
}

// seen is what a callback found when it ran (see failHeld).
type seen struct {
	err            error
	detaches, refs int
	frame          bool
}

// failHeld sends a message of 20000 bytes naming i with ctx, whose
// callback records what it finds (d's Detaches, the held frames that
// still refer to payloads) and then overwrites the payload, as a caller
// may; its outcome comes on the returned channel.
func failHeld(t *testing.T, p *core.Producer, d *spliceDialer, ctx context.Context, i int) <-chan seen {
	t.Helper()
	got := make(chan seen, 1)
	require.NoError(t, p.SendAsync(ctx, &core.Message{Payload: big(i, 20000)}, func(_ core.MessageID, m *core.Message, err error) {
		held, refs := d.holding()
		s := seen{err: err, detaches: int(d.detaches.Load()), refs: refs, frame: held > 0}
		for i := range m.Payload {
			m.Payload[i] = 0xdd
		}
		got <- s
	}))
	return got
}

// TestZeroCopyDetachBeforeFailedCallback: a message whose frame the
// connection still holds, by reference, fails (its context ends): before
// its callback runs, the connection was asked to Detach and holds no
// reference any more; the callback overwrites the payload, and the frame,
// written later, carries the payload as it was sent. Twice, in two
// passes: the second needs a Detach of its own.
func TestZeroCopyDetachBeforeFailedCallback(t *testing.T) {
	p, store, d := newSpliceEnv(t)
	d.holdAfterOne(t, p)

	for round := 1; round <= 2; round++ {
		ctx, cancel := context.WithCancel(context.Background())
		got := failHeld(t, p, d, ctx, 6+round)
		waitUntil(t, "the frame to be held", func() bool { held, refs := d.holding(); return held == round && refs == 1 })
		cancel()
		s := testkit.WaitChan(t, got, "the callback")
		assert.ErrorIs(t, s.err, context.Canceled)
		assert.True(t, s.frame, "the frame was still held when the callback ran")
		assert.Equal(t, round, s.detaches, "a Detach before each callback")
		assert.Zero(t, s.refs, "no held frame refers to the payload at the callback")
	}

	d.requireStoredAsSent(t, p, store, big(7, 20000), big(8, 20000))
}

// TestZeroCopyFailureWaitsForThePass: a message marked written whose
// frame the pump has not handed over yet (the pass is in WriteFrames)
// fails: its callback waits until the pass ended and the connection
// detached, though the message resolved before.
func TestZeroCopyFailureWaitsForThePass(t *testing.T) {
	p, store, d := newSpliceEnv(t)
	d.holdAfterOne(t, p)
	d.mu.Lock()
	d.gate = make(chan struct{})
	d.mu.Unlock()

	ctx, cancel := context.WithCancel(context.Background())
	got := failHeld(t, p, d, ctx, 9)
	waitUntil(t, "the pass to hand the frame over", func() bool { return d.gated.Load() == 1 })
	cancel()
	waitUntil(t, "the message to resolve", func() bool { return p.Stats().Unacked == 0 })
	select {
	case <-got:
		t.Fatal("the callback ran while the pass still held its frame")
	case <-time.After(50 * time.Millisecond): // it would run within microseconds
	}
	d.mu.Lock()
	close(d.gate)
	d.gate = nil
	d.mu.Unlock()
	s := testkit.WaitChan(t, got, "the callback")
	assert.ErrorIs(t, s.err, context.Canceled)
	assert.True(t, s.frame)
	assert.Equal(t, 1, s.detaches)
	assert.Zero(t, s.refs)
	d.requireStoredAsSent(t, p, store, big(9, 20000))
}

// TestZeroCopyCloseDetaches: Close with a context already ended fails a
// message whose frame the connection holds by reference: its callback
// (ErrClosed) finds no reference left.
func TestZeroCopyCloseDetaches(t *testing.T) {
	p, _, d := newSpliceEnv(t)
	d.holdAfterOne(t, p)
	got := failHeld(t, p, d, context.Background(), 10)
	waitUntil(t, "the frame to be held", func() bool { _, refs := d.holding(); return refs == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = p.Close(ctx)
	s := testkit.WaitChan(t, got, "the callback")
	assert.ErrorIs(t, s.err, core.ErrClosed)
	assert.Zero(t, s.refs, "no held frame refers to the payload at the callback")
}

// TestZeroCopyDetachBeforeSendReturns: Send of a message whose frame the
// connection holds by reference returns its failure only after a Detach
// of its own (the callback goroutine, which detaches before callbacks, is
// held up in a callback): the payload is the caller's once Send returned.
func TestZeroCopyDetachBeforeSendReturns(t *testing.T) {
	p, store, d := newSpliceEnv(t)
	inCallback, unblock := make(chan struct{}), make(chan struct{})
	require.NoError(t, p.SendAsync(context.Background(), &core.Message{Payload: []byte("declared")}, func(core.MessageID, *core.Message, error) {
		close(inCallback)
		<-unblock
	}))
	testkit.WaitChan(t, inCallback, "the callback that holds the callback goroutine")
	letGo := sync.OnceFunc(func() { close(unblock) })
	defer letGo()
	d.mu.Lock()
	d.hold = true
	d.mu.Unlock()

	ctx, cancel := context.WithCancel(context.Background())
	msg := &core.Message{Payload: big(8, 20000)}
	type result struct {
		err        error
		refs, dets int
	}
	done := make(chan result, 1)
	go func() {
		_, err := p.Send(ctx, msg)
		_, refs := d.holding()
		done <- result{err, refs, int(d.detaches.Load())}
		for i := range msg.Payload {
			msg.Payload[i] = 0xdd
		}
	}()
	waitUntil(t, "the frame to be held", func() bool { _, refs := d.holding(); return refs == 1 })
	cancel()
	r := testkit.WaitChan(t, done, "Send")
	assert.True(t, errors.Is(r.err, context.Canceled), "Send: %v", r.err)
	assert.Positive(t, r.dets, "Detach before Send returned")
	assert.Zero(t, r.refs)
	letGo()
	d.requireStoredAsSent(t, p, store, big(8, 20000))
}

// TestZeroCopyResendsCopy: a message written by reference on a connection
// that died before its receipt is written again on the next one copied
// (a late receipt of the old one would resolve it without a Detach).
func TestZeroCopyResendsCopy(t *testing.T) {
	p, store, d := newSpliceEnv(t)
	d.holdAfterOne(t, p)
	rec := newRecorder(1)
	require.NoError(t, p.SendAsync(context.Background(), &core.Message{Payload: big(9, 20000)}, rec.cb(0)))
	waitUntil(t, "the frame to be held", func() bool { _, refs := d.holding(); return refs == 1 })
	d.release(true) // lost with the connection
	d.DropConnections()
	rec.wait(t)
	require.NoError(t, rec.get(0).err)
	splices, records := d.splices(2)
	assert.Equal(t, 1, records, "written again on the second connection")
	assert.Zero(t, splices, "copied")
	first, _ := d.splices(1)
	assert.Equal(t, 1, first, "by reference the first time")
	got := store.Records(p.Name())
	require.Len(t, got, 2)
	assert.Equal(t, big(9, 20000), got[1].Payload)
}
