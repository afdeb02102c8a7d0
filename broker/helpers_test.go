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
	if typ, terr := wire.TypeOf(frame); terr == nil && err == nil && (typ == wire.TypeBatch || typ == wire.TypeHello || typ == wire.TypeTopic) {
		c.peer.waitSent(t, 1)
	}
	sent := c.peer.take()
	require.LessOrEqual(t, len(sent), 1, "frames sent for one inbound frame")
	if len(sent) == 0 {
		return nil, err
	}
	if typ, _ := wire.TypeOf(frame); typ == wire.TypeHello && err == nil {
		if rt, _ := wire.TypeOf(sent[0]); rt == wire.TypeError {
			// Refused on the session's HELLO goroutine: the next Handle
			// returns the failure.
			err = c.Handle(wire.AppendPing(nil, wire.Ping{}))
			require.Error(t, err, "Handle after an ERROR")
		}
	}
	return sent[0], err
}

// helloReply is a HELLO_OK and the TOPIC_OK of the default topic after it.
type helloReply struct {
	wire.HelloOK
	LastSeq uint64 // the TOPIC_OK's
}

// hello sends HELLO for name, then TOPIC for wire.DefaultTopic as id 0
// (the id of batchFrame), and returns the HELLO_OK and TOPIC_OK.
func (c conn) hello(t testing.TB, name string) helloReply {
	t.Helper()
	reply, err := c.handle(t, helloFrame(t, name, wire.DefaultMaxFrameSize))
	require.NoError(t, err)
	return helloReply{HelloOK: helloOK(t, reply), LastSeq: c.topic(t, 0, wire.DefaultTopic)}
}

// topic declares topic as id and returns the TOPIC_OK's last seq.
func (c conn) topic(t testing.TB, id uint32, topic string) uint64 {
	t.Helper()
	reply, err := c.handle(t, topicFrame(t, id, topic))
	require.NoError(t, err)
	ok := testkit.TopicOK(t, reply)
	require.Equal(t, id, ok.ID)
	return ok.LastSeq
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
// incarnation) and TOPIC for the default topic as id 0, and returns the
// HELLO_OK and TOPIC_OK.
func (c conn) helloEpoch(t testing.TB, name string, epoch uint64) helloReply {
	t.Helper()
	reply, err := c.handle(t, helloEpochFrame(t, name, epoch, false))
	require.NoError(t, err)
	return helloReply{HelloOK: helloOK(t, reply), LastSeq: c.topic(t, 0, wire.DefaultTopic)}
}

func helloEpochFrame(t testing.TB, name string, epoch uint64, yield bool) []byte {
	t.Helper()
	f, err := wire.AppendHello(nil, wire.Hello{Version: wire.Version, MaxFrameSize: wire.DefaultMaxFrameSize,
		Epoch: epoch, Yield: yield, Producer: name})
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
	f, err := wire.AppendHello(nil, wire.Hello{Version: wire.Version, MaxFrameSize: maxFrame, Producer: name})
	require.NoError(t, err)
	return f
}

// payload is the record for seq in generation gen; the generation tells a
// first write from a resend of the same seq.
func payload(gen int, seq uint64) []byte { return fmt.Appendf(nil, "g%d-s%d", gen, seq) }

// batchFrame builds a BATCH of topic id 0 of n records with seqs
// first..first+n-1.
func batchFrame(gen int, first uint64, n int) []byte { return topicBatch(0, gen, first, n) }

// topicBatch builds a BATCH of topic id of n records with seqs
// first..first+n-1.
func topicBatch(id uint32, gen int, first uint64, n int) []byte {
	var bb wire.BatchBuilder
	bb.Reset(nil, id, first)
	for i := range n {
		bb.Add(payload(gen, first+uint64(i)))
	}
	return bb.Finish()
}

// The raw frames, shared with the tests of transport/mem and server.
var (
	topicFrame = testkit.TopicFrame
	helloOK    = testkit.HelloOK
	topicOK    = func(t testing.TB, frame []byte) uint64 { return testkit.TopicOK(t, frame).LastSeq }
	receipt    = testkit.Receipt
	receipts   = testkit.Receipts
	errorFrame = testkit.ErrorFrame
)

var (
	seqRange = testkit.SeqRange
	seqs     = testkit.Seqs // the seqs stored for a name
)

// dflt is the topic of the store tests that do not care about topics.
const dflt = wire.DefaultTopic

var seqRecs = testkit.Records
