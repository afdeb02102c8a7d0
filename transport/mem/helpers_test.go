package mem_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/transport/mem"
	"github.com/inflightmq/inflight/wire"
)

// waitLimit bounds every wait: past it the test fails.
const waitLimit = 10 * time.Second

// waitUntil polls cond until it holds, failing the test after waitLimit.
func waitUntil(t testing.TB, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for: %s", waitLimit, fmt.Sprintf(format, args...))
		}
		time.Sleep(time.Millisecond)
	}
}

// event is one Handler call: a frame, or the close.
type event struct {
	frame  []byte // copy; nil for the close
	closed bool
	err    error
	at     time.Time
}

// recorder is a transport.Handler that records every call. It checks what a
// Handler may assume: calls never overlap, never come before Dial returned
// (when dialed is set), and OnClose comes once, last.
type recorder struct {
	dialed *atomic.Bool // set by the test right after Dial returns; nil: not checked

	mu     sync.Mutex
	events []event

	inCall  atomic.Bool
	overlap atomic.Bool // two calls ran at once
	early   atomic.Bool // a call came before dialed was set
	closes  atomic.Int32
	closed  chan struct{} // closed by the first OnClose
}

func newRecorder() *recorder { return &recorder{closed: make(chan struct{})} }

func (r *recorder) enter() {
	if r.inCall.Swap(true) {
		r.overlap.Store(true)
	}
	if r.dialed != nil && !r.dialed.Load() {
		r.early.Store(true)
	}
}

func (r *recorder) leave() { r.inCall.Store(false) }

func (r *recorder) OnFrame(frame []byte) {
	r.enter()
	defer r.leave()
	e := event{frame: bytes.Clone(frame), at: time.Now()}
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) OnClose(err error) {
	r.enter()
	defer r.leave()
	r.mu.Lock()
	r.events = append(r.events, event{closed: true, err: err, at: time.Now()})
	r.mu.Unlock()
	if r.closes.Add(1) == 1 {
		close(r.closed)
	}
}

// frames returns the frames received so far.
func (r *recorder) frames() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	var fs [][]byte
	for _, e := range r.events {
		if !e.closed {
			fs = append(fs, e.frame)
		}
	}
	return fs
}

func (r *recorder) frameEvents() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var es []event
	for _, e := range r.events {
		if !e.closed {
			es = append(es, e)
		}
	}
	return es
}

func (r *recorder) nframes() int { return len(r.frames()) }

// waitFrames waits until n frames have arrived and returns them.
func (r *recorder) waitFrames(t testing.TB, n int) [][]byte {
	t.Helper()
	waitUntil(t, func() bool { return r.nframes() >= n }, "%d frames (have %d)", n, r.nframes())
	return r.frames()
}

// waitClosed waits for OnClose and returns its error.
func (r *recorder) waitClosed(t testing.TB) error {
	t.Helper()
	testkit.WaitChan(t, r.closed, "OnClose")
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e.closed {
			return e.err
		}
	}
	panic("closed without a close event")
}

func (r *recorder) isClosed() bool { return r.closes.Load() > 0 }

// check verifies the Handler contract once no more calls can come (after
// Dialer.Close): exactly one OnClose, after every OnFrame, no overlapping
// calls, none before Dial returned.
func (r *recorder) check(t testing.TB) {
	t.Helper()
	require.False(t, r.overlap.Load(), "Handler calls overlapped")
	require.False(t, r.early.Load(), "Handler called before Dial returned")
	require.Equal(t, int32(1), r.closes.Load(), "OnClose calls")
	r.mu.Lock()
	defer r.mu.Unlock()
	require.True(t, r.events[len(r.events)-1].closed, "OnClose is the last call")
}

// buffers hands out transport.Buffers whose Release is counted through
// their Owner channel.
type buffers struct {
	owner chan *transport.Buffer
	n     int // buffers handed out
}

func newBuffers() *buffers { return &buffers{owner: make(chan *transport.Buffer, 4096)} }

func (b *buffers) buf(frame []byte) *transport.Buffer {
	b.n++
	return &transport.Buffer{Bytes: frame, Owner: b.owner}
}

// released drains the buffers released so far, failing on one released
// twice, and returns how many there were in total.
func (b *buffers) released(t testing.TB, seen map[*transport.Buffer]bool) int {
	t.Helper()
	for {
		select {
		case buf := <-b.owner:
			require.False(t, seen[buf], "buffer released twice")
			seen[buf] = true
		default:
			return len(seen)
		}
	}
}

// env is a broker on a MemoryStore and a Dialer to it, closed at cleanup.
type env struct {
	store  *broker.MemoryStore
	broker *broker.Broker
	d      *mem.Dialer
}

func newEnv(t testing.TB, opts ...broker.Option) *env {
	t.Helper()
	store := broker.NewMemoryStore()
	b, err := broker.New(store, opts...)
	require.NoError(t, err)
	d := mem.NewDialer(b)
	t.Cleanup(func() { closeDialer(t, d) })
	return &env{store: store, broker: b, d: d}
}

// closeDialer closes d, failing the test if Close does not return in time.
func closeDialer(t testing.TB, d *mem.Dialer) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- d.Close() }()
	require.NoError(t, testkit.WaitChan(t, done, "Dialer.Close"))
}

// dial dials with a fresh recorder that checks it is not called before
// Dial returns.
func (e *env) dial(t testing.TB) (transport.Conn, *recorder) {
	t.Helper()
	r := newRecorder()
	r.dialed = new(atomic.Bool)
	c, err := e.d.Dial(context.Background(), r)
	r.dialed.Store(true)
	require.NoError(t, err)
	return c, r
}

// write writes frame, failing the test on error.
func write(t testing.TB, c transport.Conn, frame []byte) {
	t.Helper()
	require.NoError(t, c.WriteFrame(&transport.Buffer{Bytes: frame}))
}

func helloFrame(t testing.TB, name string) []byte {
	t.Helper()
	f, err := wire.AppendHello(nil, wire.Hello{Version: wire.Version, MaxFrameSize: wire.DefaultMaxFrameSize, Producer: name})
	require.NoError(t, err)
	return f
}

func payload(seq uint64) []byte { return fmt.Appendf(nil, "rec-%d", seq) }

// batchFrame builds a BATCH of n records with seqs first..first+n-1.
func batchFrame(first uint64, n int) []byte {
	var bb wire.BatchBuilder
	bb.Reset(nil, 0, first)
	for i := range n {
		bb.Add(payload(first + uint64(i)))
	}
	return bb.Finish()
}

func pingFrame(nonce uint64) []byte { return wire.AppendPing(nil, wire.Ping{Nonce: nonce}) }

func typeOf(t testing.TB, frame []byte) wire.Type {
	t.Helper()
	typ, err := wire.TypeOf(frame)
	require.NoError(t, err)
	return typ
}

var (
	helloOK    = testkit.HelloOK
	topicOK    = testkit.TopicOK
	receipt    = testkit.Receipt
	errorFrame = testkit.ErrorFrame
)

func pong(t testing.TB, frame []byte) uint64 {
	t.Helper()
	p, err := wire.DecodePong(frame)
	require.NoError(t, err, "want PONG, got %v", testkit.DescribeFrame(frame))
	return p.Nonce
}

// topicFrame declares wire.DefaultTopic as id 0: the topic of batchFrame
// and of the store's Records and Len.
func topicFrame(t testing.TB) []byte { return testkit.TopicFrame(t, 0, wire.DefaultTopic) }

// handshake writes HELLO for name and the TOPIC of batchFrame, waits for
// the HELLO_OK and the TOPIC_OK, and returns the TOPIC_OK: batches may
// follow.
func handshake(t testing.TB, c transport.Conn, r *recorder, name string) wire.TopicOK {
	t.Helper()
	n := r.nframes()
	write(t, c, helloFrame(t, name))
	write(t, c, topicFrame(t))
	fs := r.waitFrames(t, n+2)
	helloOK(t, fs[n])
	ok := topicOK(t, fs[n+1])
	require.Zero(t, ok.ID)
	return ok
}

// declare writes the TOPIC of batchFrame on a connection whose HELLO was
// written, and waits until the broker opened it: a BATCH written after
// declare is the topic's, whether or not the TOPIC_OK reached the
// recorder (a delay may hold it).
func (e *env) declare(t testing.TB, c transport.Conn) {
	t.Helper()
	before := e.broker.Stats().Topics
	write(t, c, topicFrame(t))
	waitUntil(t, func() bool { return e.broker.Stats().Topics > before }, "the topic open")
}

var (
	seqRange = testkit.SeqRange
	seqs     = testkit.Seqs
)

// writeMaybe writes frame to a connection that may be closing: the write
// succeeds or fails with ErrClosed.
func writeMaybe(t testing.TB, c transport.Conn, frame []byte) {
	t.Helper()
	if err := c.WriteFrame(&transport.Buffer{Bytes: frame}); err != nil {
		require.ErrorIs(t, err, transport.ErrClosed)
	}
}

// receipts returns the sequence IDs of fs, which must all be RECEIPTs, and
// checks that they increase: the broker acknowledges every frame stored
// together with one receipt, so there may be fewer receipts than frames.
func receipts(t testing.TB, fs [][]byte) []uint64 {
	t.Helper()
	var seqs []uint64
	for _, f := range fs {
		seq := receipt(t, f)
		if n := len(seqs); n > 0 {
			require.Greater(t, seq, seqs[n-1], "receipts increase")
		}
		seqs = append(seqs, seq)
	}
	return seqs
}

// waitReceipt waits until a RECEIPT of seq or more has arrived and returns
// every frame received so far.
func (r *recorder) waitReceipt(t testing.TB, seq uint64) [][]byte {
	t.Helper()
	waitUntil(t, func() bool {
		for _, f := range r.frames() {
			if rs, err := wire.DecodeReceipts(f, nil); err == nil && rs[0].Seq >= seq {
				return true
			}
		}
		return false
	}, "a receipt of %d", seq)
	return r.frames()
}

// waitType waits until a frame of type typ has arrived.
func (r *recorder) waitType(t testing.TB, typ wire.Type) {
	t.Helper()
	waitUntil(t, func() bool {
		for _, f := range r.frames() {
			if got, err := wire.TypeOf(f); err == nil && got == typ {
				return true
			}
		}
		return false
	}, "a %v", typ)
}
