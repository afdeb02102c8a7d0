package broker_test

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/wire"
)

// fakePeer is a broker.Peer that records the frames a session sends (copied:
// they are valid only during Send) and counts Close calls, which may come
// from any goroutine.
type fakePeer struct {
	mu      sync.Mutex
	frames  [][]byte
	sendErr error // returned by Send instead of recording, when set

	closes atomic.Int32
}

func (p *fakePeer) Send(frame []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sendErr != nil {
		return p.sendErr
	}
	p.frames = append(p.frames, bytes.Clone(frame))
	return nil
}

func (p *fakePeer) Close() error {
	p.closes.Add(1)
	return nil
}

func (p *fakePeer) closed() bool { return p.closes.Load() > 0 }

// next waits for the next frame sent and takes it, or returns nil once the
// peer is closed with nothing sent. It gives up after 10s.
func (p *fakePeer) next() []byte {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		if len(p.frames) > 0 {
			f := p.frames[0]
			p.frames = p.frames[1:]
			p.mu.Unlock()
			return f
		}
		p.mu.Unlock()
		if p.closed() {
			return nil
		}
		time.Sleep(50 * time.Microsecond)
	}
	return nil
}

// waitUntil waits for cond, failing the test after 10s.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// waitSent waits until n frames were sent and not taken yet.
func (p *fakePeer) waitSent(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.mu.Lock()
		have := len(p.frames)
		p.mu.Unlock()
		if have >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %d frames sent (have %d)", n, have)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// take returns the frames sent since the last take and forgets them.
func (p *fakePeer) take() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.frames
	p.frames = nil
	return f
}

// conn is a session and its fake peer.
type conn struct {
	*broker.Session
	peer *fakePeer
}

// newConn starts a session; it is closed at the end of the test (Close is
// idempotent), which stops its appender.
func newConn(t testing.TB, b *broker.Broker) conn {
	p := &fakePeer{}
	c := conn{Session: b.NewSession(p), peer: p}
	t.Cleanup(c.Close)
	return c
}

// handle feeds frame to the session and returns its error and its reply:
// the one frame it sent, or nil if it sent none. A session never sends more
// than one frame per inbound frame handled alone. The reply to a BATCH (a
// RECEIPT or an ERROR) comes from the session's appender: handle waits for
// it.
func (c conn) handle(t testing.TB, frame []byte) ([]byte, error) {
	t.Helper()
	var err error
	require.NotPanics(t, func() { err = c.Handle(frame) })
	if typ, terr := wire.TypeOf(frame); terr == nil && typ == wire.TypeBatch && err == nil {
		c.peer.waitSent(t, 1)
	}
	sent := c.peer.take()
	require.LessOrEqual(t, len(sent), 1, "frames sent for one inbound frame")
	if len(sent) == 0 {
		return nil, err
	}
	return sent[0], err
}

// hello sends HELLO for name and returns the HELLO_OK.
func (c conn) hello(t testing.TB, name string) wire.HelloOK {
	t.Helper()
	reply, err := c.handle(t, helloFrame(t, name, wire.DefaultMaxFrameSize))
	require.NoError(t, err)
	return helloOK(t, reply)
}

// send sends a BATCH of n records from first (payloads of generation gen)
// and returns the RECEIPT's seq.
func (c conn) send(t testing.TB, gen int, first uint64, n int) uint64 {
	t.Helper()
	reply, err := c.handle(t, batchFrame(gen, first, n))
	require.NoError(t, err)
	return receipt(t, reply)
}

// helloEpoch sends HELLO for name with an epoch (a reconnect of that
// incarnation) and returns the HELLO_OK.
func (c conn) helloEpoch(t testing.TB, name string, epoch uint64) wire.HelloOK {
	t.Helper()
	reply, err := c.handle(t, helloEpochFrame(t, name, epoch, false))
	require.NoError(t, err)
	return helloOK(t, reply)
}

func helloEpochFrame(t testing.TB, name string, epoch uint64, yield bool) []byte {
	t.Helper()
	f, err := wire.AppendHello(nil, wire.Hello{Version: wire.Version, MaxFrameSize: wire.DefaultMaxFrameSize,
		Epoch: epoch, Yield: yield, Producer: name, Topic: wire.DefaultTopic})
	require.NoError(t, err)
	return f
}

func newBroker(t testing.TB, opts ...broker.Option) (*broker.Broker, *broker.MemoryStore) {
	t.Helper()
	store := broker.NewMemoryStore()
	b, err := broker.New(store, opts...)
	require.NoError(t, err)
	return b, store
}

func helloFrame(t testing.TB, name string, maxFrame uint32) []byte {
	t.Helper()
	f, err := wire.AppendHello(nil, wire.Hello{Version: wire.Version, MaxFrameSize: maxFrame, Producer: name, Topic: wire.DefaultTopic})
	require.NoError(t, err)
	return f
}

// payload is the record for seq in generation gen; the generation tells a
// first write from a resend of the same seq.
func payload(gen int, seq uint64) []byte { return fmt.Appendf(nil, "g%d-s%d", gen, seq) }

// batchFrame builds a BATCH of n records with seqs first..first+n-1.
func batchFrame(gen int, first uint64, n int) []byte {
	var bb wire.BatchBuilder
	bb.Reset(nil, first)
	for i := range n {
		bb.Add(payload(gen, first+uint64(i)))
	}
	return bb.Finish()
}

func helloOK(t testing.TB, frame []byte) wire.HelloOK {
	t.Helper()
	h, err := wire.DecodeHelloOK(frame)
	require.NoError(t, err, "want HELLO_OK, got %s", testkit.DescribeFrame(frame))
	return h
}

func receipt(t testing.TB, frame []byte) uint64 {
	t.Helper()
	r, err := wire.DecodeReceipt(frame)
	require.NoError(t, err, "want RECEIPT, got %s", testkit.DescribeFrame(frame))
	return r.Seq
}

func errorFrame(t testing.TB, frame []byte) wire.Error {
	t.Helper()
	e, err := wire.DecodeError(frame)
	require.NoError(t, err, "want ERROR, got %s", testkit.DescribeFrame(frame))
	return e
}

var seqRange = testkit.SeqRange

// seqs returns the seqs stored for name.
func seqs(store *broker.MemoryStore, name string) []uint64 {
	var s []uint64
	for _, r := range store.Records(name) {
		s = append(s, r.Seq)
	}
	return s
}

// dflt is the topic of the store tests that do not care about topics.
const dflt = wire.DefaultTopic

var seqRecs = testkit.Records

// lastSeq returns State's LastSeq.
func lastSeq(s broker.Store, topic, producer string) (uint64, error) {
	st, err := s.State(topic, producer)
	return st.LastSeq, err
}
