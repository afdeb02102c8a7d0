package core_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
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

// batchFrame decodes frame if it is a BATCH (ok), and says why not if it
// is one that does not decode.
func batchFrame(frame []byte) (b wire.Batch, ok bool, err error) {
	if t, err := wire.TypeOf(frame); err != nil || t != wire.TypeBatch {
		return wire.Batch{}, false, nil
	}
	b, err = wire.DecodeBatch(frame)
	return b, err == nil, err
}

// flights follows the BATCH frames written on a connection whose RECEIPT
// has not come back, by topic: the producer's windows as the wire sees
// them.
type flights struct {
	mu      sync.Mutex
	byTopic map[uint32][]uint64 // last seq of each frame in flight, by topic id, on the current connection
	n       int                 // frames in flight
	most    int                 // the most frames ever in flight at once
	batches int
}

// reset starts a new connection: a resend starts afresh.
func (f *flights) reset() {
	f.mu.Lock()
	f.byTopic, f.n = map[uint32][]uint64{}, 0
	f.mu.Unlock()
}

// sent records frame, written, if it is a BATCH.
func (f *flights) sent(frame []byte) error {
	b, ok, err := batchFrame(frame)
	if !ok {
		return err
	}
	f.mu.Lock()
	f.byTopic[b.Topic] = append(f.byTopic[b.Topic], b.LastSeq())
	f.n++
	f.most = max(f.most, f.n)
	f.batches++
	f.mu.Unlock()
	return nil
}

// received ends the flights frame acknowledges, if it is a RECEIPT.
func (f *flights) received(frame []byte) {
	if t, err := wire.TypeOf(frame); err != nil || t != wire.TypeReceipt {
		return
	}
	rs, err := wire.DecodeReceipts(frame, nil)
	if err != nil {
		return
	}
	f.mu.Lock()
	for _, r := range rs {
		l := f.byTopic[r.Topic]
		i := 0
		for i < len(l) && l[i] <= r.Seq {
			i++
		}
		f.byTopic[r.Topic], f.n = l[i:], f.n-i
	}
	f.mu.Unlock()
}

// flightsHandler passes inbound frames on, after f saw them.
type flightsHandler struct {
	transport.Handler
	f *flights
}

func (h *flightsHandler) OnFrame(frame []byte) {
	h.f.received(frame)
	h.Handler.OnFrame(frame)
}

// dial starts a new connection through d whose receipts f watches.
func (f *flights) dial(ctx context.Context, d transport.Dialer, h transport.Handler) (transport.Conn, error) {
	f.reset()
	return d.Dial(ctx, &flightsHandler{Handler: h, f: f})
}

// windowWatch wraps a Dialer and follows, on every connection, the BATCH
// frames written whose RECEIPT has not come back.
type windowWatch struct {
	transport.Dialer
	flights
}

func (w *windowWatch) Dial(ctx context.Context, h transport.Handler) (transport.Conn, error) {
	c, err := w.dial(ctx, w.Dialer, h)
	if err != nil {
		return nil, err
	}
	return &watchConn{Conn: c, w: w}, nil
}

type watchConn struct {
	transport.Conn
	w *windowWatch
}

func (c *watchConn) WriteFrame(buf *transport.Buffer) error {
	if err := c.w.sent(buf.Bytes); err != nil {
		return err
	}
	return c.Conn.WriteFrame(buf)
}

// TestProducerWindowByReceipts: with the broker's receipts delayed, the
// frames in flight never exceed MaxFramesInFlight, and the messages sent
// meanwhile leave in bigger frames instead of a queue of small ones.
func TestProducerWindowByReceipts(t *testing.T) {
	for _, window := range []int{1, 4} {
		t.Run(fmt.Sprint("window=", window), func(t *testing.T) {
			const bursts, per = 40, 100
			most, batches := sendInBursts(t, bursts, per, 4, core.MaxFramesInFlight(window))
			assert.LessOrEqual(t, most, window, "frames in flight")
			assert.Equal(t, window, most, "the window was never full: the test did not load it")
			// Every frame waits ~5 ms for its receipt, so at most
			// window frames leave per 5 ms: over 40 bursts 1 ms apart,
			// frames carry many messages each.
			perBatch := float64(bursts*per) / float64(batches)
			assert.Greater(t, perBatch, 20.0, "%d batches for %d messages", batches, bursts*per)
			t.Logf("window %d: %d batches, %.0f messages per batch", window, batches, perBatch)
		})
	}
}

// TestWindowCountsFramesAtTheByteLimitByBytes: a frame the byte limit
// closed takes the share of 2 MiB of a place in its topic's window that
// its limit, or its own size if larger, has (rounded up, at least 1/16 and
// at most half a place: it cannot grow, and more of them in flight is what
// keeps the connection busy), so with receipts held back a topic of such
// frames has up to 2n MiB of them in flight on a transport that takes
// several frames at once (its connection's window is 16n frames), and one
// whose frames the message limit closes has n. On a transport that takes
// frames one by one the connection's window of n frames holds both to n.
func TestWindowCountsFramesAtTheByteLimitByBytes(t *testing.T) {
	for _, tc := range []struct {
		name        string
		vec         bool
		n           int // MaxFramesInFlight
		opt         core.Option
		count, size int
		most        int
	}{
		// 80 frames of 4 messages, 1/16 of a place each.
		{"4 KiB frames", true, 2, core.MaxBatchBytes(4096), 320, 1000, 32},
		// 32 frames of 2 messages, 1/8 each.
		{"256 KiB frames", true, 2, core.MaxBatchBytes(256 << 10), 64, 100 << 10, 16},
		// 20 frames of 3 messages, 200/128 rounded up: 1/8 each.
		{"200 KiB frames", true, 2, core.MaxBatchBytes(200 << 10), 60, 64 << 10, 16},
		// 16 frames of 2 messages, half a place each.
		{"1 MiB frames", true, 2, core.MaxBatchBytes(1 << 20), 32, 400 << 10, 4},
		// 16 frames of one message each, beyond the limit: half a place
		// each, as their size says, not 1/16 as the limit's.
		{"1 MiB messages in 4 KiB frames", true, 2, core.MaxBatchBytes(4096), 16, 1 << 20, 4},
		// 33 frames of 130 messages closed at 128 KiB (mid-sized records:
		// see cachedFrameBytes), 1/16 each, and one of 10.
		{"mid-sized records at the default limit", true, 2, core.MaxBatchBytes(1 << 20), 4300, 1000, 32},
		{"closed by MaxBatchMessages", true, 2, core.MaxBatchMessages(2), 32, 1000, 2},
		{"4 KiB frames, one by one", false, 2, core.MaxBatchBytes(4096), 32, 1000, 2},
		{"4 KiB frames, one by one, a window of one", false, 1, core.MaxBatchBytes(4096), 32, 1000, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			most, batches := sendBeforeConnect(t, tc.vec, tc.count, tc.size, core.MaxFramesInFlight(tc.n), tc.opt)
			assert.Equal(t, tc.most, most, "the most frames in flight at once (%d batches)", batches)
		})
	}
}

// TestCachedFramesOnlyUncompressedOverFramesWriters: frames of mid-sized
// records close at 128 KiB over a transport that takes several frames at
// once (as tcp and stdnet do), and grow to MaxBatchBytes over one that
// takes them one by one (mem) and for a producer that compresses.
func TestCachedFramesOnlyUncompressedOverFramesWriters(t *testing.T) {
	for _, tc := range []struct {
		name    string
		vec     bool
		opts    []core.Option
		batches int
	}{
		{"several at once", true, nil, 16}, // 15 frames of 130, one of 50
		{"one by one", false, nil, 2},      // 1045 and 955
		{"compressed", true, []core.Option{core.Compression(wire.CodecS2, wire.LevelDefault)}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, batches := sendBeforeConnect(t, tc.vec, 2000, 1000, append(tc.opts, core.MaxFramesInFlight(4))...)
			assert.Equal(t, tc.batches, batches, "frames written")
		})
	}
}

// sendBeforeConnect sends count messages of size bytes (at least 4)
// through a producer with opts whose first connection opens once all are
// queued, so that its frames are as full as the limits let them be, to a
// broker whose receipts come 100 ms late, over a transport that takes
// frames one by one, or several at once (vec); it requires every message
// to succeed and returns the most frames that were in flight at once and
// the frames written.
func sendBeforeConnect(t *testing.T, vec bool, count, size int, opts ...core.Option) (most, batches int) {
	t.Helper()
	e := newEnv(t)
	e.dialer.DelayReceipts(100 * time.Millisecond)
	var d transport.Dialer
	var f *flights
	if vec {
		w := &vecWatch{Dialer: e.dialer}
		d, f = w, &w.flights
	} else {
		w := &windowWatch{Dialer: e.dialer}
		d, f = w, &w.flights
	}
	gate := &gatedDialer{Dialer: d, open: make(chan struct{})}
	p := newWindowed(t, gate, opts...)
	rec := newRecorder(count)
	for k := range count {
		require.NoError(t, p.SendAsync(context.Background(), sized(k, size), rec.cb(k)))
	}
	close(gate.open)
	rec.waitSucceeded(t, count)
	return f.counts()
}

// gatedDialer dials through Dialer once open is closed, or fails when the
// dial's context ends first.
type gatedDialer struct {
	transport.Dialer
	open chan struct{}
}

func (g *gatedDialer) Dial(ctx context.Context, h transport.Handler) (transport.Conn, error) {
	select {
	case <-g.open:
		return g.Dialer.Dial(ctx, h)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// sendInBursts sends bursts of per messages of size bytes (at least 4),
// the bursts a millisecond apart so that messages keep arriving while
// frames wait for their receipts, through a producer with opts to a broker
// whose receipts come 5 ms late; it requires every message to succeed and
// returns the most frames that were in flight at once and the frames
// written.
func sendInBursts(t *testing.T, bursts, per, size int, opts ...core.Option) (most, batches int) {
	t.Helper()
	e := newEnv(t)
	e.dialer.DelayReceipts(5 * time.Millisecond)
	w := &windowWatch{Dialer: e.dialer}
	p := newWindowed(t, w, opts...)
	rec := newRecorder(bursts * per)
	for b := range bursts {
		for i := range per {
			k := b*per + i
			require.NoError(t, p.SendAsync(context.Background(), sized(k, size), rec.cb(k)))
		}
		time.Sleep(time.Millisecond)
	}
	rec.waitSucceeded(t, bursts*per)
	return w.counts()
}

// newWindowed returns a producer named "windowed" with opts through d,
// closed when the test ends.
func newWindowed(t *testing.T, d transport.Dialer, opts ...core.Option) *core.Producer {
	t.Helper()
	p, err := core.New(d, append([]core.Option{core.Name("windowed"),
		core.ReconnectBackoff(time.Millisecond, 10*time.Millisecond)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close(context.Background()) })
	return p
}

// sized is message k (its payload starts with payload(k)) of size bytes,
// at least 4.
func sized(k, size int) *core.Message {
	return &core.Message{Payload: append(payload(k), make([]byte, size-4)...)}
}

// counts returns the most frames that were in flight at once and the
// frames written.
func (f *flights) counts() (most, batches int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.most, f.batches
}

// TestFullWindowSendsDoNotSpinThePump: while a topic's window is full (its
// broker holds every Append), messages sent to it do not wake the pump one
// by one, only to find no room: the lane waits for a receipt or a release,
// and senders' kicks are no-ops meanwhile. (Each send woke the pump before:
// on a real connection the pump spun through a pass per message, taking a
// core from the sender.)
func TestFullWindowSendsDoNotSpinThePump(t *testing.T) {
	store := &stuckStore{MemoryStore: broker.NewMemoryStore(), topic: "held", release: make(chan struct{})}
	released := false
	defer func() {
		if !released {
			close(store.release)
		}
	}()
	p, acked, cb := oneFrameAtATime(t, store)
	before := core.PumpPasses(p)
	const n = 2000
	for i := 1; i <= n; i++ {
		require.NoError(t, p.SendAsync(context.Background(), &core.Message{Payload: payload(i)}, cb))
		for range 3 { // as a sender paced by its work: the pump may run between sends
			runtime.Gosched()
		}
	}
	passes := core.PumpPasses(p) - before
	t.Logf("%d pump passes for %d sends while the window was full", passes, n)
	assert.Less(t, passes, uint64(n/10), "pump passes for %d sends while the window was full", n)
	close(store.release)
	released = true
	waitUntil(t, "every message acknowledged once the broker stores again", func() bool { return acked.Load() == n+1 })
}

// TestPumpParksAtOnceWhileLanesWaitForRoom: when every lane with messages
// waits for room in its window, the pump parks without yielding first:
// only a receipt or a release gives it work then, and a yielding pump waits
// behind the goroutines it yields to. 200 messages queued behind a held
// Append go out one frame at a time (window 1, one message per batch), the
// pump waiting for a receipt between any two, until the next to last frame
// is held too: the topic always has a message left to write, so the pump
// never yields meanwhile (it yields only for a drained lane, where a sender
// is often about to publish). Yielding before every park made it spinTries
// yields per frame.
func TestPumpParksAtOnceWhileLanesWaitForRoom(t *testing.T) {
	const n = 200
	store := &gatedStore{MemoryStore: broker.NewMemoryStore(), gates: map[string]chan struct{}{"held": make(chan struct{}, n)}}
	passed := 0
	defer func() { store.pass(n - passed) }()
	p, acked, cb := oneFrameAtATime(t, store)
	for i := 1; i < n; i++ {
		require.NoError(t, p.SendAsync(context.Background(), &core.Message{Payload: payload(i)}, cb))
	}
	before := core.PumpYields(p)
	store.pass(n - 2) // frames 1 to n-2; frame n-1 is written and held, message n-1 waits
	passed = n - 2
	waitUntil(t, "n-2 messages acknowledged, the next to last frame written", func() bool {
		return acked.Load() == n-2 && p.Stats().Batches == n-1
	})
	yields := core.PumpYields(p) - before
	store.pass(2)
	passed = n
	waitUntil(t, "every message acknowledged", func() bool { return acked.Load() == n })
	t.Logf("%d yields of the pump over %d frames written one receipt apart", yields, n-2)
	assert.Zero(t, yields, "the pump yielded while its lane waited for a receipt")
}

// oneFrameAtATime starts a producer of topic "held" on a broker over
// store, with one message per frame and one frame in flight, sends message
// 0 and waits until its frame is written. It returns the producer, the
// count of messages acknowledged and the callback that counts them. The
// producer is closed at the test's cleanup, after its deferred calls (which
// must let store's Appends go on by then).
func oneFrameAtATime(t *testing.T, store broker.Store) (*core.Producer, *atomic.Int64, core.Callback) {
	t.Helper()
	b, err := broker.New(store)
	require.NoError(t, err)
	d := mem.NewDialer(b)
	p, err := core.New(d, core.Name("window1"), core.Topic("held"), core.MaxFramesInFlight(1), core.MaxBatchMessages(1),
		core.SendTimeout(time.Minute))
	require.NoError(t, err)
	t.Cleanup(func() {
		testkit.CloseProducer(t, p, 5*time.Second)
		_ = d.Close()
	})
	acked := new(atomic.Int64)
	cb := func(_ core.MessageID, _ *core.Message, err error) {
		if err == nil {
			acked.Add(1)
		}
	}
	require.NoError(t, p.SendAsync(context.Background(), &core.Message{Payload: payload(0)}, cb))
	waitUntil(t, "the first frame written", func() bool { return p.Stats().Batches == 1 })
	return p, acked, cb
}

// gatedStore holds every Append of a gated topic until a token comes on
// its gate.
type gatedStore struct {
	*broker.MemoryStore
	gates map[string]chan struct{}
}

// pass lets n more Appends of every gated topic through.
func (s *gatedStore) pass(n int) {
	for _, g := range s.gates {
		for range n {
			g <- struct{}{}
		}
	}
}

// waitSucceeded waits for the callbacks of messages 0 to n-1 and requires
// every one a success.
func (r *recorder) waitSucceeded(t *testing.T, n int) {
	t.Helper()
	r.wait(t)
	for k := range n {
		require.NoError(t, r.get(k).err, "message %d", k)
	}
}

func (s *gatedStore) Append(topic, producer string, epoch uint64, recs []broker.Record) error {
	if g, ok := s.gates[topic]; ok {
		<-g
	}
	return s.MemoryStore.Append(topic, producer, epoch, recs)
}

// topicsWatch wraps a Conn and records the topic id of every BATCH frame
// written, in order.
type topicsWatch struct {
	transport.Dialer
	mu  sync.Mutex
	ids []uint32
}

func (w *topicsWatch) Dial(ctx context.Context, h transport.Handler) (transport.Conn, error) {
	c, err := w.Dialer.Dial(ctx, h)
	if err != nil {
		return nil, err
	}
	return &topicsConn{Conn: c, w: w}, nil
}

func (w *topicsWatch) written() []uint32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]uint32(nil), w.ids...)
}

type topicsConn struct {
	transport.Conn
	w *topicsWatch
}

func (c *topicsConn) WriteFrame(buf *transport.Buffer) error {
	b, ok, err := batchFrame(buf.Bytes)
	if err != nil {
		return err
	}
	if ok {
		c.w.mu.Lock()
		c.w.ids = append(c.w.ids, b.Topic)
		c.w.mu.Unlock()
	}
	return c.Conn.WriteFrame(buf)
}

// TestWindowServesTopicsInTurn: a topic that waits for room in the
// connection's window gets it before a topic that asks later, even one
// whose receipt is what made the room. (Before, the topic just
// acknowledged took every place that opened, with the few messages it
// had, while the topics that waited grew frames that did not leave: with
// 1000 topics on tcp, frames of 40 messages instead of 105.)
func TestWindowServesTopicsInTurn(t *testing.T) {
	store := &gatedStore{MemoryStore: broker.NewMemoryStore(), gates: map[string]chan struct{}{}}
	for _, topic := range []string{"a", "b", "c", "d"} {
		store.gates[topic] = make(chan struct{}, 8)
	}
	b, err := broker.New(store)
	require.NoError(t, err)
	d := mem.NewDialer(b)
	w := &topicsWatch{Dialer: d}
	// A window of 3 frames (mem writes frames one by one): a topic's first
	// and second frames take a place, its third fills its own window.
	p, err := core.New(w, core.Name("turns"), core.MaxFramesInFlight(3), core.SendTimeout(time.Minute))
	require.NoError(t, err)
	defer func() {
		for _, g := range store.gates {
			close(g)
		}
		testkit.CloseProducer(t, p, 5*time.Second)
		_ = d.Close()
	}()
	rec := newRecorder(5)
	send := func(k int, topic string) {
		require.NoError(t, p.SendAsync(context.Background(), &core.Message{Topic: topic, Payload: payload(k)}, rec.cb(k)))
	}
	// Every topic declared, each with a frame in flight: the window is
	// full.
	for k, topic := range []string{"a", "b", "c"} {
		send(k, topic)
		waitUntil(t, topic+"'s frame written", func() bool { return len(w.written()) == k+1 })
	}
	idA := w.written()[0]
	// c, then a, ask for room: a send kicks its topic before it returns,
	// and the pump takes kicks and receipts in the order they came.
	send(3, "c")
	send(4, "a")
	store.gates["a"] <- struct{}{} // a's receipt makes one place
	waitUntil(t, "a frame after a's receipt", func() bool { return len(w.written()) == 4 })
	assert.NotEqual(t, idA, w.written()[3], "a took the place its receipt made, ahead of c, which asked first")

	store.pass(4)
	rec.waitSucceeded(t, 5)
}

// holdingWatch is topicsWatch whose WriteFrame holds the first BATCH of
// topic id hold (once set) until release is closed, on the pump's
// goroutine, in the middle of the pump's pass.
type holdingWatch struct {
	topicsWatch
	hold    atomic.Uint32
	held    chan struct{} // closed when the held write began
	release chan struct{}
	once    sync.Once
}

func (w *holdingWatch) Dial(ctx context.Context, h transport.Handler) (transport.Conn, error) {
	c, err := w.Dialer.Dial(ctx, h)
	if err != nil {
		return nil, err
	}
	return &holdingConn{topicsConn: topicsConn{Conn: c, w: &w.topicsWatch}, hw: w}, nil
}

type holdingConn struct {
	topicsConn
	hw *holdingWatch
}

func (c *holdingConn) WriteFrame(buf *transport.Buffer) error {
	if b, ok, _ := batchFrame(buf.Bytes); ok && b.Topic == c.hw.hold.Load() {
		c.hw.once.Do(func() {
			close(c.hw.held)
			<-c.hw.release
		})
	}
	return c.topicsConn.WriteFrame(buf)
}

// TestWindowKeepsThePlaceOfAnAdmittedTopic: a place in the connection's
// window that a waiting topic was given stays its own until the pump
// serves it, also when a topic that wrote in the same pass, and has more,
// comes first in the pump's next pass. The pump is held inside one pass
// (a write of topic d) while k and a are sent and b's receipt arrives, so
// that its next pass serves k, a and b in that order: k takes the last
// place, a waits, b's receipt makes one, a is given it; then k must not
// take it.
func TestWindowKeepsThePlaceOfAnAdmittedTopic(t *testing.T) {
	store := &gatedStore{MemoryStore: broker.NewMemoryStore(), gates: map[string]chan struct{}{
		"b": make(chan struct{}, 8), "c": make(chan struct{}, 8),
	}}
	b, err := broker.New(store)
	require.NoError(t, err)
	d := mem.NewDialer(b)
	w := &holdingWatch{topicsWatch: topicsWatch{Dialer: d}, held: make(chan struct{}), release: make(chan struct{})}
	// A window of 4 frames (mem), one message per frame.
	p, err := core.New(w, core.Name("kept"), core.MaxFramesInFlight(4), core.MaxBatchMessages(1), core.SendTimeout(time.Minute))
	require.NoError(t, err)
	released := false
	defer func() {
		if !released {
			close(w.release)
		}
		for _, g := range store.gates {
			close(g)
		}
		testkit.CloseProducer(t, p, 5*time.Second)
		_ = d.Close()
	}()
	ctx := context.Background()
	rec := newRecorder(6)
	send := func(k int, topic string) {
		require.NoError(t, p.SendAsync(ctx, &core.Message{Topic: topic, Payload: payload(k)}, rec.cb(k)))
	}
	// k and a declared, nothing of theirs in flight.
	_, err = p.Send(ctx, &core.Message{Topic: "k", Payload: payload(100)})
	require.NoError(t, err)
	_, err = p.Send(ctx, &core.Message{Topic: "a", Payload: payload(101)})
	require.NoError(t, err)
	idK, idA := w.written()[0], w.written()[1]
	// c and b in flight, held by the store: 2 places of 4.
	send(0, "c")
	send(1, "b")
	waitUntil(t, "c's and b's frames written", func() bool { return len(w.written()) == 4 })
	// d declared; its first frame's write holds the pump inside a pass.
	w.hold.Store(5) // k, a, c and b have ids 1 to 4 on this connection
	send(2, "d")
	testkit.WaitChan(t, w.held, "d's write to begin")
	// Meanwhile: k has two messages, a one, and b's receipt comes.
	send(3, "k")
	send(4, "k")
	send(5, "a")
	store.gates["b"] <- struct{}{}
	waitUntil(t, "b's receipt taken", func() bool { return p.Stats().Acked == 3 })
	close(w.release) // d's frame takes a third place
	released = true
	waitUntil(t, "the frames after d's", func() bool { return len(w.written()) >= 7 })
	got := w.written()[5:7]
	assert.Equal(t, []uint32{idK, idA}, got, "k took a's place (k's first frame, then a's)")

	store.pass(4)
	rec.waitSucceeded(t, 6)
}

// vecWatch wraps a Dialer whose connections it makes FramesWriters (each
// WriteFrames hands the frames to the inner WriteFrame in turn), records
// how many frames each WriteFrames carried and the most BATCH frames in
// flight at once (by topic and receipt), and fails the WriteFrames call
// numbered failAt (1-based, over all connections; 0: none), closing that
// connection.
type vecWatch struct {
	transport.Dialer
	failAt int
	flights

	callsMu sync.Mutex
	calls   []int
}

func (w *vecWatch) Dial(ctx context.Context, h transport.Handler) (transport.Conn, error) {
	c, err := w.dial(ctx, w.Dialer, h)
	if err != nil {
		return nil, err
	}
	return &vecConn{Conn: c, w: w}, nil
}

type vecConn struct {
	transport.Conn
	w *vecWatch
}

func (c *vecConn) WriteFrames(bufs []*transport.Buffer) error {
	c.w.callsMu.Lock()
	c.w.calls = append(c.w.calls, len(bufs))
	fail := len(c.w.calls) == c.w.failAt
	c.w.callsMu.Unlock()
	if fail {
		c.Conn.Close()
		return fmt.Errorf("%w: the test failed this write", transport.ErrClosed)
	}
	for _, b := range bufs { // all of the call in flight before any is written
		if err := c.w.sent(b.Bytes); err != nil {
			return err
		}
	}
	for _, b := range bufs {
		if err := c.Conn.WriteFrame(b); err != nil {
			return err
		}
	}
	return nil
}

// TestFramesWriterTakesAPassAtOnce: on a transport that writes several
// frames at once the pump hands it the frames of a pass in one call, and
// the connection carries up to 16 times a topic's window in all (here far
// more frames than MaxFramesInFlight); a failed WriteFrames ends the
// connection like a failed WriteFrame, and the next one writes again what
// was not acknowledged: every message stored once, in order per topic.
func TestFramesWriterTakesAPassAtOnce(t *testing.T) {
	store := broker.NewMemoryStore()
	b, err := broker.New(store)
	require.NoError(t, err)
	d := mem.NewDialer(b)
	d.DelayReceipts(5 * time.Millisecond) // frames pile up in flight
	w := &vecWatch{Dialer: d, failAt: 3}
	p, err := core.New(w, core.Name("vec"), core.MaxFramesInFlight(2), core.SendTimeout(time.Minute),
		core.ReconnectBackoff(time.Millisecond, 10*time.Millisecond))
	require.NoError(t, err)
	defer func() {
		testkit.CloseProducer(t, p, 5*time.Second)
		_ = d.Close()
	}()
	const topics, per = 50, 20
	rec := newRecorder(topics * per)
	for i := range per {
		for k := range topics {
			n := i*topics + k
			require.NoError(t, p.SendAsync(context.Background(), &core.Message{Topic: fmt.Sprint("v", k), Payload: payload(n)}, rec.cb(n)))
		}
	}
	rec.wait(t)
	for n := range topics * per {
		require.NoError(t, rec.get(n).err, "message %d", n)
	}
	assert.Positive(t, p.Stats().Reconnects, "the failed write ended the connection")
	for k := range topics {
		recs := store.TopicRecords(fmt.Sprint("v", k), "vec")
		require.Len(t, recs, per, "topic v%d", k)
		for i, r := range recs {
			require.Equal(t, uint64(i+1), r.Seq, "topic v%d", k)
			require.Equal(t, payload(i*topics+k), r.Payload, "topic v%d", k)
		}
	}
	w.callsMu.Lock()
	defer w.callsMu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	assert.Greater(t, slices.Max(w.calls), 1, "frames of a pass in one call: %v", w.calls)
	assert.Greater(t, w.most, 2*2, "frames in flight at once, beyond mem's window of MaxFramesInFlight")
	assert.LessOrEqual(t, w.most, topics*2, "no topic beyond its own window")
	t.Logf("%d calls, up to %d frames per call, up to %d frames in flight", len(w.calls), slices.Max(w.calls), w.most)
}
