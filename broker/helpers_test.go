package broker_test

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
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

func newConn(b *broker.Broker) conn {
	p := &fakePeer{}
	return conn{Session: b.NewSession(p), peer: p}
}

// handle feeds frame to the session and returns its error and its reply:
// the one frame it sent, or nil if it sent none. A session never sends more
// than one frame per inbound frame.
func (c conn) handle(t testing.TB, frame []byte) ([]byte, error) {
	t.Helper()
	var err error
	require.NotPanics(t, func() { err = c.Handle(frame) })
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
	require.NoError(t, err, "want HELLO_OK, got %s", describe(frame))
	return h
}

func receipt(t testing.TB, frame []byte) uint64 {
	t.Helper()
	r, err := wire.DecodeReceipt(frame)
	require.NoError(t, err, "want RECEIPT, got %s", describe(frame))
	return r.Seq
}

func errorFrame(t testing.TB, frame []byte) wire.Error {
	t.Helper()
	e, err := wire.DecodeError(frame)
	require.NoError(t, err, "want ERROR, got %s", describe(frame))
	return e
}

// describe names a frame for failure messages.
func describe(frame []byte) string {
	if frame == nil {
		return "no frame"
	}
	typ, err := wire.TypeOf(frame)
	if err != nil {
		return fmt.Sprintf("invalid frame (%v)", err)
	}
	if typ == wire.TypeError {
		if e, err := wire.DecodeError(frame); err == nil {
			return fmt.Sprintf("ERROR %v %q", e.Code, e.Text)
		}
	}
	return typ.String()
}

// seqRange returns first..last.
func seqRange(first, last uint64) []uint64 {
	var s []uint64
	for q := first; q <= last; q++ {
		s = append(s, q)
	}
	return s
}

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

// seqRecs returns payloads as records with the sequence IDs first, first+1, ...
func seqRecs(first uint64, payloads [][]byte) []broker.Record {
	if len(payloads) == 0 {
		return nil
	}
	out := make([]broker.Record, len(payloads))
	for i, p := range payloads {
		out[i] = broker.Record{Seq: first + uint64(i), Payload: p}
	}
	return out
}
