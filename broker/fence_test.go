package broker_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/wire"
)

// TestFenceEpochs: each HELLO of epoch 0 is a new incarnation with the next
// epoch, stored before its HELLO_OK; a reconnect presents its epoch and
// resumes; an older epoch is fenced at its HELLO; an epoch above the
// stored one (the Store lost it) is taken as the newest.
func TestFenceEpochs(t *testing.T) {
	b, store := newBroker(t)
	a := newConn(t, b)
	ok := a.hello(t, "p")
	require.Equal(t, uint64(1), ok.Epoch)
	st, err := store.State(dflt, "p")
	require.NoError(t, err)
	assert.Equal(t, uint64(1), st.Epoch, "stored before HELLO_OK")
	a.send(t, 0, 1, 5)
	a.Close()

	c := newConn(t, b)
	ok = c.helloEpoch(t, "p", 1)
	assert.Equal(t, helloReply{HelloOK: wire.HelloOK{MaxFrameSize: wire.DefaultMaxFrameSize, Epoch: 1}, LastSeq: 5}, ok, "a reconnect resumes")
	c.Close()

	d := newConn(t, b)
	assert.Equal(t, uint64(2), d.hello(t, "p").Epoch)
	d.Close()

	old := newConn(t, b)
	reply, err := old.handle(t, helloEpochFrame(t, "p", 1, false))
	require.ErrorIs(t, err, broker.ErrFenced)
	e := errorFrame(t, reply)
	assert.Equal(t, wire.CodeFenced, e.Code)
	assert.Contains(t, e.Text, "epoch 1, but epoch 2 holds the name")

	// A memory store that restarted empty: a producer of epoch 7 is the
	// newest anyone knows of.
	b2, err := broker.New(broker.NewMemoryStore())
	require.NoError(t, err)
	late := newConn(t, b2)
	ok = late.helloEpoch(t, "p", 7)
	assert.Equal(t, uint64(7), ok.Epoch)
	assert.Equal(t, uint64(1), b.Stats().Fenced, "one fenced HELLO")
	assert.Zero(t, b.Stats().ProtocolErrors)
}

// TestYield: a HELLO of epoch 0 with Yield is refused while a live session
// holds the name, and takes it once that session is gone; a reconnect of
// the holder is not refused.
func TestYield(t *testing.T) {
	b, _ := newBroker(t)
	a := newConn(t, b)
	a.hello(t, "p")
	w := newConn(t, b)
	reply, err := w.handle(t, helloEpochFrame(t, "p", 0, true))
	require.ErrorIs(t, err, broker.ErrNameInUse)
	assert.Equal(t, wire.CodeNameInUse, errorFrame(t, reply).Code)
	assert.False(t, a.peer.closed(), "the holder is left alone")
	assert.Equal(t, uint64(1), b.Stats().NameInUse)

	again := newConn(t, b) // the holder's reconnect, with Yield as it was dialed
	reply, err = again.handle(t, helloEpochFrame(t, "p", 1, true))
	require.NoError(t, err)
	assert.Equal(t, uint64(1), helloOK(t, reply).Epoch)
	again.Close()
	a.Close()

	w2 := newConn(t, b)
	reply, err = w2.handle(t, helloEpochFrame(t, "p", 0, true))
	require.NoError(t, err)
	assert.Equal(t, uint64(2), helloOK(t, reply).Epoch)
}

// TestFenceThroughSharedStore: two brokers on one Store, as gateways on one
// stream. A session of epoch 1 lives on broker A when a new incarnation
// takes the name on broker B: A does not know, but its next Append is
// refused by the Store, and A ends the session as fenced, acknowledging
// nothing of it. B's HELLO_OK counts what A stored before the fence.
func TestFenceThroughSharedStore(t *testing.T) {
	store := broker.NewMemoryStore()
	bA, err := broker.New(store)
	require.NoError(t, err)
	bB, err := broker.New(store)
	require.NoError(t, err)
	a := newConn(t, bA)
	require.Equal(t, uint64(1), a.hello(t, "p").Epoch)
	a.send(t, 0, 1, 10)

	// A reconnect of epoch 1 on B, then a new incarnation on B: B's view
	// of the name is fresh from the Store each time.
	r := newConn(t, bB)
	require.Equal(t, uint64(1), r.helloEpoch(t, "p", 1).Epoch)
	r.Close()
	c := newConn(t, bB)
	ok := c.hello(t, "p")
	assert.Equal(t, uint64(2), ok.Epoch)
	assert.Equal(t, uint64(10), ok.LastSeq)
	assert.False(t, a.peer.closed(), "A learns of the fence at its next write")

	reply, err := a.handle(t, batchFrame(1, 11, 5))
	require.NoError(t, err, "queued; the appender finds the fence")
	assert.Equal(t, wire.CodeFenced, errorFrame(t, reply).Code)
	waitUntil(t, "A's peer closed", a.peer.closed) // the ERROR is sent before the close
	require.ErrorIs(t, a.Handle(wire.AppendPing(nil, wire.Ping{Nonce: 1})), broker.ErrFenced)
	assert.Equal(t, seqRange(1, 10), seqs(store, "p"))
	assert.Equal(t, uint64(1), bA.Stats().Fenced)
	assert.Zero(t, bA.Stats().ProtocolErrors)

	// A new incarnation on A, whose cached epoch was 1: its Fence(2) is
	// refused by the Store, it reads the state again and fences 3.
	d := newConn(t, bA)
	assert.Equal(t, uint64(3), d.hello(t, "p").Epoch)
	reply, err = c.handle(t, batchFrame(2, 11, 5))
	require.NoError(t, err)
	assert.Equal(t, wire.CodeFenced, errorFrame(t, reply).Code, "C, on B, is fenced at its next write")
	assert.Equal(t, seqRange(1, 10), seqs(store, "p"))
}

// pinStore is a MemoryStore that is a broker.Pinner: it counts each name's
// pins.
type pinStore struct {
	*broker.MemoryStore
	mu   sync.Mutex
	pins map[string]int
}

func (p *pinStore) Pin(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pins[name]++
}

func (p *pinStore) Unpin(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pins[name]--
}

func (p *pinStore) pinned(name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pins[name]
}

// TestPinLiveSessions: a Store that forgets idle names (broker.Pinner) has
// the name of every live session pinned, once, from its HELLO_OK until the
// session lets the name go; a takeover passes the pin on, a refused HELLO
// pins nothing.
func TestPinLiveSessions(t *testing.T) {
	store := &pinStore{MemoryStore: broker.NewMemoryStore(), pins: map[string]int{}}
	b, err := broker.New(store)
	require.NoError(t, err)

	a := newConn(t, b)
	ok := a.hello(t, "p")
	assert.Equal(t, 1, store.pinned("p"), "pinned before HELLO_OK")

	// A reconnect of the same incarnation replaces a; a newer one fences
	// it: the name stays pinned once, by whoever holds it.
	r := newConn(t, b)
	r.helloEpoch(t, "p", ok.Epoch)
	assert.Equal(t, 1, store.pinned("p"), "replaced: the pin passes on")
	a.Close()
	assert.Equal(t, 1, store.pinned("p"), "the replaced session holds no pin")
	n := newConn(t, b)
	n.hello(t, "p")
	assert.Equal(t, 1, store.pinned("p"), "fenced: the pin passes on")

	// Refused: an older epoch pins nothing.
	old := newConn(t, b)
	_, err = old.handle(t, helloEpochFrame(t, "p", ok.Epoch, false))
	require.ErrorIs(t, err, broker.ErrFenced)
	old.Close()
	r.Close()
	assert.Equal(t, 1, store.pinned("p"))

	n.Close()
	assert.Equal(t, 0, store.pinned("p"), "unpinned when the holder closes")

	// A new holder pins again.
	c := newConn(t, b)
	c.hello(t, "p")
	assert.Equal(t, 1, store.pinned("p"))
	c.Close()
	assert.Equal(t, 0, store.pinned("p"))
}

// TestSameInstanceHelloIsNotANewIncarnation: a Producer that redials before
// it heard the answer to its first HELLO sends a second HELLO of epoch 0
// with the same Instance. Whichever the broker admits last, the Producer
// keeps one epoch: the later session replaces the earlier, and nothing is
// fenced. A HELLO of epoch 0 with another Instance is a new incarnation.
func TestSameInstanceHelloIsNotANewIncarnation(t *testing.T) {
	b, _ := newBroker(t)
	hello := func(instance uint64) []byte {
		f, err := wire.AppendHello(nil, wire.Hello{Version: wire.Version, MaxFrameSize: wire.DefaultMaxFrameSize,
			Instance: instance, Producer: "p"})
		require.NoError(t, err)
		return f
	}
	first := newConn(t, b)
	reply, err := first.handle(t, hello(7))
	require.NoError(t, err)
	assert.Equal(t, uint64(1), helloOK(t, reply).Epoch)

	second := newConn(t, b)
	reply, err = second.handle(t, hello(7))
	require.NoError(t, err)
	assert.Equal(t, uint64(1), helloOK(t, reply).Epoch, "the same incarnation")
	waitUntil(t, "the first session to be closed", first.peer.closed)
	assert.Empty(t, first.peer.take(), "replaced, not fenced: no ERROR")
	assert.Equal(t, uint64(0), b.Stats().Fenced)

	third := newConn(t, b)
	reply, err = third.handle(t, hello(8))
	require.NoError(t, err)
	assert.Equal(t, uint64(2), helloOK(t, reply).Epoch, "another Producer: a new incarnation")
	e := errorFrame(t, second.peer.next())
	assert.Equal(t, wire.CodeFenced, e.Code)
}
