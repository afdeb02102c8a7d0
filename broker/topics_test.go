package broker_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/wire"
)

// open sends HELLO for name and waits for its HELLO_OK.
func (c conn) open(t testing.TB, name string) {
	t.Helper()
	reply, err := c.handle(t, helloFrame(t, name, wire.DefaultMaxFrameSize))
	require.NoError(t, err)
	helloOK(t, reply)
}

func TestManyTopicsOneConnection(t *testing.T) {
	b, store := newBroker(t)
	c := newConn(t, b)
	defer c.Close()
	c.open(t, "p")
	const topics = 50
	for i := range topics {
		require.Zero(t, c.topic(t, uint32(i), topicName(i)))
	}
	for round := range 3 {
		for i := range topics {
			reply, err := c.handle(t, topicBatch(uint32(i), round, uint64(round*2+1), 2))
			require.NoError(t, err)
			assert.Equal(t, []wire.Receipt{{Topic: uint32(i), Seq: uint64(round*2 + 2)}}, receipts(t, reply))
		}
	}
	for i := range topics {
		assert.Equal(t, seqRange(1, 6), topicSeqs(store, topicName(i), "p"))
	}
	st := testkit.StatsAfter(t, b, 3*topics)
	assert.Equal(t, int64(topics), st.Topics)
	assert.Equal(t, uint64(3*topics), st.Batches)
	c.Close()
	assert.Zero(t, b.Stats().Topics)
}

func topicName(i int) string { return "t" + string(rune('a'+i%26)) + string(rune('a'+i/26)) }

func topicSeqs(store *broker.MemoryStore, topic, name string) []uint64 {
	var s []uint64
	for _, r := range store.TopicRecords(topic, name) {
		s = append(s, r.Seq)
	}
	return s
}

func TestTopicProtocolErrors(t *testing.T) {
	b, _ := newBroker(t)
	for _, tc := range []struct {
		name     string
		frames   func(t *testing.T) [][]byte // after HELLO_OK when hello
		hello    bool
		wantCode wire.ErrorCode
		wantErr  error
	}{
		{name: "TOPIC before HELLO", frames: func(t *testing.T) [][]byte { return [][]byte{topicFrame(t, 1, "a")} },
			wantCode: wire.CodeHelloRequired},
		{name: "BATCH for an undeclared id", hello: true, frames: func(t *testing.T) [][]byte { return [][]byte{topicBatch(3, 0, 1, 1)} },
			wantCode: wire.CodeProtocol},
		{name: "id declared twice", hello: true, frames: func(t *testing.T) [][]byte { return [][]byte{topicFrame(t, 0, "b")} },
			wantCode: wire.CodeProtocol},
		{name: "name declared twice", hello: true, frames: func(t *testing.T) [][]byte { return [][]byte{topicFrame(t, 9, dflt)} },
			wantCode: wire.CodeProtocol},
		{name: "malformed TOPIC", hello: true, frames: func(t *testing.T) [][]byte { return [][]byte{{0, 0, 0, 3, 8, 0, 0}} },
			wantCode: wire.CodeProtocol, wantErr: wire.ErrTruncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newConn(t, b)
			defer c.Close()
			if tc.hello {
				c.hello(t, "p") // declares dflt as id 0
			}
			frames := tc.frames(t)
			for _, f := range frames[:len(frames)-1] {
				_, err := c.handle(t, f)
				require.NoError(t, err)
			}
			reply, err := c.handle(t, frames[len(frames)-1])
			require.ErrorIs(t, err, broker.ErrProtocol)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			}
			assert.Equal(t, tc.wantCode, errorFrame(t, reply).Code)
		})
	}
}

// TestBatchBeforeTopicOK: a BATCH for an id whose TOPIC_OK was not sent yet
// (its Store.State is in flight) is a protocol error.
func TestBatchBeforeTopicOK(t *testing.T) {
	store := &topicGate{MemoryStore: broker.NewMemoryStore(), stateTopic: "slow", gate: make(chan struct{})}
	b, err := broker.New(store)
	require.NoError(t, err)
	c := newConn(t, b)
	defer c.Close()
	defer store.open()
	c.open(t, "p")
	require.NoError(t, c.Handle(topicFrame(t, 1, "slow")))
	testkit.WaitChan(t, store.started(), "State of the slow topic")
	reply, err := c.handle(t, topicBatch(1, 0, 1, 1))
	require.ErrorIs(t, err, broker.ErrProtocol)
	assert.Contains(t, errorFrame(t, reply).Text, "before its TOPIC_OK")
}

// TestOldProtocolVersionRefusedClearly: a producer of protocol version 3
// (a HELLO laid out with its topic) gets an ERROR of code version that
// names both versions and what to do.
func TestOldProtocolVersionRefusedClearly(t *testing.T) {
	b, _ := newBroker(t)
	c := newConn(t, b)
	defer c.Close()
	// A version 3 HELLO: version, max frame, epoch, flags, name, topic.
	v3 := []byte{0, 0, 0, 20, byte(wire.TypeHello), 0, 3, 0, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 'p', 1, 't'}
	reply, err := c.handle(t, v3)
	require.ErrorIs(t, err, broker.ErrProtocol)
	require.ErrorIs(t, err, wire.ErrVersion)
	e := errorFrame(t, reply)
	assert.Equal(t, wire.CodeVersion, e.Code)
	assert.Contains(t, e.Text, "peer speaks 3, want 4")
	assert.Contains(t, e.Text, "upgrade the producer")
}

// TestNewIncarnationFencesEveryTopic: a new incarnation's HELLO fences the
// old session of its name on every topic the old one declared, before the
// new one declared any; the old session's later TOPIC (for a topic neither
// declared) is refused as fenced, and the Store refuses the old epoch's
// Appends on every topic.
func TestNewIncarnationFencesEveryTopic(t *testing.T) {
	b, store := newBroker(t)
	old := newConn(t, b)
	defer old.Close()
	old.open(t, "p")
	require.Zero(t, old.topic(t, 1, "a"))
	require.Zero(t, old.topic(t, 2, "b"))
	reply, err := old.handle(t, topicBatch(1, 0, 1, 3))
	require.NoError(t, err)
	assert.Equal(t, uint64(3), receipts(t, reply)[0].Seq)

	neu := newConn(t, b)
	defer neu.Close()
	reply, err = neu.handle(t, helloFrame(t, "p", wire.DefaultMaxFrameSize))
	require.NoError(t, err)
	assert.Equal(t, uint64(2), helloOK(t, reply).Epoch)

	e := errorFrame(t, old.peer.next())
	assert.Equal(t, wire.CodeFenced, e.Code)
	waitUntil(t, "the old peer closed", old.peer.closed)
	_, err = old.handle(t, topicFrame(t, 3, "c"))
	require.ErrorIs(t, err, broker.ErrFenced)
	_, err = old.handle(t, topicBatch(2, 0, 1, 1))
	require.ErrorIs(t, err, broker.ErrFenced)

	// The Store holds the new epoch for the name: the old one's Appends are
	// refused on every topic, including "c", which nobody declared.
	for _, topic := range []string{"a", "b", "c"} {
		err := store.Append(topic, "p", 1, seqRecs(10, recs("late")))
		require.ErrorIs(t, err, broker.ErrFenced, topic)
	}
	assert.Equal(t, uint64(3), c3(store))
	assert.Equal(t, uint64(1), b.Stats().Fenced)
	// The new incarnation continues after what the old one stored.
	assert.Equal(t, uint64(3), neu.topic(t, 7, "a"))
}

func c3(store *broker.MemoryStore) uint64 { return uint64(store.TopicLen("a", "p")) }

// topicGate blocks State of stateTopic, or Append of appendTopic, until
// open.
type topicGate struct {
	*broker.MemoryStore
	stateTopic, appendTopic string
	gate                    chan struct{}
	once                    sync.Once
	in                      chan struct{}
	inOnce                  sync.Once
}

func (g *topicGate) started() chan struct{} {
	g.inOnce.Do(func() { g.in = make(chan struct{}) })
	return g.in
}

func (g *topicGate) open() { g.once.Do(func() { close(g.gate) }) }

func (g *topicGate) wait() {
	in := g.started()
	select {
	case <-in:
	default:
		close(in)
	}
	<-g.gate
}

func (g *topicGate) State(topic, producer string) (broker.NameState, error) {
	if topic == g.stateTopic {
		g.wait()
	}
	return g.MemoryStore.State(topic, producer)
}

func (g *topicGate) Append(topic, producer string, epoch uint64, recs []broker.Record) error {
	if topic == g.appendTopic {
		g.wait()
	}
	return g.MemoryStore.Append(topic, producer, epoch, recs)
}

// TestBlockedAppendDoesNotBlockOtherTopics: an Append of topic "slow" held
// in the Store holds neither the receipts of topic "fast" on the same
// connection nor its PINGs; the slow topic's receipt follows its Append.
func TestBlockedAppendDoesNotBlockOtherTopics(t *testing.T) {
	store := &topicGate{MemoryStore: broker.NewMemoryStore(), appendTopic: "slow", gate: make(chan struct{})}
	b, err := broker.New(store)
	require.NoError(t, err)
	c := newConn(t, b)
	defer c.Close()
	defer store.open()
	c.open(t, "p")
	require.Zero(t, c.topic(t, 1, "slow"))
	require.Zero(t, c.topic(t, 2, "fast"))

	require.NoError(t, c.Handle(topicBatch(1, 0, 1, 2)))
	testkit.WaitChan(t, store.started(), "the slow Append")
	for k := range 5 {
		reply, err := c.handle(t, topicBatch(2, 0, uint64(k+1), 1))
		require.NoError(t, err)
		assert.Equal(t, []wire.Receipt{{Topic: 2, Seq: uint64(k + 1)}}, receipts(t, reply))
	}
	reply, err := c.handle(t, wire.AppendPing(nil, wire.Ping{Nonce: 9}))
	require.NoError(t, err)
	_, perr := wire.DecodePong(reply)
	require.NoError(t, perr)
	// Another frame of the slow topic waits behind its Append.
	require.NoError(t, c.Handle(topicBatch(1, 0, 3, 1)))
	assert.Empty(t, c.peer.take(), "no receipt of the slow topic before its Append returned")

	store.open()
	var got []wire.Receipt
	waitUntil(t, "the slow topic's receipts", func() bool {
		for _, f := range c.peer.take() {
			got = append(got, receipts(t, f)...)
		}
		return len(got) > 0 && got[len(got)-1].Seq == 3
	})
	for _, r := range got {
		assert.Equal(t, uint32(1), r.Topic)
	}
	assert.Equal(t, seqRange(1, 3), topicSeqs(store.MemoryStore, "slow", "p"))
	assert.Equal(t, seqRange(1, 5), topicSeqs(store.MemoryStore, "fast", "p"))
}

// TestReceiptsCoalesced: receipts of several topics ready while one is
// being sent go out together in one RECEIPT frame of several entries.
func TestReceiptsCoalesced(t *testing.T) {
	b, store := newBroker(t)
	p := &blockingPeer{fakePeer: &fakePeer{}, hold: make(chan struct{}), held: make(chan struct{}, 1)}
	s := b.NewSession(p)
	defer s.Close()
	defer p.release()
	require.NoError(t, s.Handle(helloFrame(t, "p", wire.DefaultMaxFrameSize)))
	const topics = 5
	for i := range topics {
		require.NoError(t, s.Handle(topicFrame(t, uint32(i), topicName(i))))
	}
	p.waitSent(t, 1+topics) // HELLO_OK and the TOPIC_OKs
	p.take()

	// The first receipt's Send blocks; the other topics' receipts wait
	// for it, then go in one frame.
	p.block.Store(true)
	require.NoError(t, s.Handle(topicBatch(0, 0, 1, 1)))
	testkit.WaitChan(t, p.held, "the first RECEIPT's Send")
	for i := 1; i < topics; i++ {
		require.NoError(t, s.Handle(topicBatch(uint32(i), 0, 1, uint64ToInt(uint64(i)))))
	}
	// Batches counts a frame once its receipt is handed on: to the peer,
	// or to the goroutine sending (topic 0's, blocked).
	waitUntil(t, "the other topics' receipts handed on", func() bool { return b.Stats().Batches == topics-1 })
	p.block.Store(false)
	p.release()
	p.waitSent(t, 2)
	frames := p.take()
	require.Len(t, frames, 2)
	assert.Equal(t, []wire.Receipt{{Topic: 0, Seq: 1}}, receipts(t, frames[0]))
	rest := receipts(t, frames[1])
	assert.ElementsMatch(t, []wire.Receipt{{Topic: 1, Seq: 1}, {Topic: 2, Seq: 2}, {Topic: 3, Seq: 3}, {Topic: 4, Seq: 4}}, rest)
	assert.Equal(t, 4, store.TopicLen(topicName(4), "p"))
}

func uint64ToInt(u uint64) int { return int(u) }

// blockingPeer blocks the Send it is told to until release.
type blockingPeer struct {
	*fakePeer
	block   atomicBool
	hold    chan struct{}
	held    chan struct{}
	relOnce sync.Once
}

type atomicBool struct {
	mu sync.Mutex
	v  bool
}

func (a *atomicBool) Store(v bool) { a.mu.Lock(); a.v = v; a.mu.Unlock() }
func (a *atomicBool) Load() bool   { a.mu.Lock(); defer a.mu.Unlock(); return a.v }

func (p *blockingPeer) Send(frame []byte) error {
	if p.block.Load() {
		select {
		case p.held <- struct{}{}:
		default:
		}
		<-p.hold
	}
	return p.fakePeer.Send(frame)
}

func (p *blockingPeer) release() { p.relOnce.Do(func() { close(p.hold) }) }

// TestStoreErrorEndsOneTopic: a Store error on one topic ends it with a
// TOPIC_ERROR; the other topics of the connection go on.
func TestStoreErrorEndsOneTopic(t *testing.T) {
	store := &failingTopicStore{MemoryStore: broker.NewMemoryStore(), topic: "bad", err: errors.New("subject full")}
	b, err := broker.New(store)
	require.NoError(t, err)
	c := newConn(t, b)
	defer c.Close()
	c.open(t, "p")
	require.Zero(t, c.topic(t, 1, "bad"))
	require.Zero(t, c.topic(t, 2, "good"))
	reply, err := c.handle(t, topicBatch(1, 0, 1, 2))
	require.NoError(t, err)
	te, err := wire.DecodeTopicError(reply)
	require.NoError(t, err, "want TOPIC_ERROR, got %s", testkit.DescribeFrame(reply))
	assert.Equal(t, uint32(1), te.ID)
	assert.Equal(t, wire.CodeStore, te.Code)
	assert.Contains(t, te.Text, "subject full")
	reply, err = c.handle(t, topicBatch(2, 0, 1, 2))
	require.NoError(t, err)
	assert.Equal(t, []wire.Receipt{{Topic: 2, Seq: 2}}, receipts(t, reply))
	assert.Equal(t, uint64(1), b.Stats().TopicErrors)
	assert.Equal(t, int64(1), b.Stats().Topics)
}

type failingTopicStore struct {
	*broker.MemoryStore
	topic string
	err   error
}

func (f *failingTopicStore) Append(topic, producer string, epoch uint64, recs []broker.Record) error {
	if topic == f.topic {
		return f.err
	}
	return f.MemoryStore.Append(topic, producer, epoch, recs)
}

// TestMaxTopics: a TOPIC beyond MaxTopics is refused alone.
func TestMaxTopics(t *testing.T) {
	_, err := broker.New(broker.NewMemoryStore(), broker.MaxTopics(0))
	require.ErrorIs(t, err, broker.ErrInvalidOption)
	b, _ := newBroker(t, broker.MaxTopics(2))
	c := newConn(t, b)
	defer c.Close()
	c.open(t, "p")
	c.topic(t, 1, "a")
	c.topic(t, 2, "b")
	reply, err := c.handle(t, topicFrame(t, 3, "c"))
	require.NoError(t, err)
	te, err := wire.DecodeTopicError(reply)
	require.NoError(t, err)
	assert.Equal(t, wire.TopicError{ID: 3, Code: wire.CodeProtocol, Text: te.Text}, te)
	reply, err = c.handle(t, topicBatch(1, 0, 1, 1))
	require.NoError(t, err)
	assert.Equal(t, uint64(1), receipts(t, reply)[0].Seq, "the connection goes on")
}

// fenceGate blocks Fence of one name until open.
type fenceGate struct {
	*broker.MemoryStore
	name string
	gate chan struct{}
	in   chan struct{}
}

func (f *fenceGate) Fence(producer string, epoch uint64) error {
	if producer == f.name {
		close(f.in)
		<-f.gate
	}
	return f.MemoryStore.Fence(producer, epoch)
}

// TestSlowFenceHoldsNoReader: a HELLO whose Store.Fence is held does not
// hold its connection's reader (a PING is answered, a TOPIC queued behind
// the HELLO) nor another connection's HELLO.
func TestSlowFenceHoldsNoReader(t *testing.T) {
	store := &fenceGate{MemoryStore: broker.NewMemoryStore(), name: "slow", gate: make(chan struct{}), in: make(chan struct{})}
	b, err := broker.New(store)
	require.NoError(t, err)
	var once sync.Once
	open := func() { once.Do(func() { close(store.gate) }) }
	defer open()
	slow := newConn(t, b)
	defer slow.Close()
	require.NoError(t, slow.Handle(helloFrame(t, "slow", wire.DefaultMaxFrameSize)))
	testkit.WaitChan(t, store.in, "the held Fence")
	require.NoError(t, slow.Handle(topicFrame(t, 0, dflt)))
	reply, err := slow.handle(t, wire.AppendPing(nil, wire.Ping{Nonce: 4}))
	require.NoError(t, err)
	nonce, err := wire.DecodePong(reply)
	require.NoError(t, err, "want PONG, got %s", testkit.DescribeFrame(reply))
	assert.Equal(t, uint64(4), nonce.Nonce)

	other := newConn(t, b)
	defer other.Close()
	assert.Equal(t, uint64(1), other.hello(t, "quick").Epoch)

	open()
	slow.peer.waitSent(t, 2)
	frames := slow.peer.take()
	assert.Equal(t, uint64(1), helloOK(t, frames[0]).Epoch)
	assert.Zero(t, topicOK(t, frames[1]), "the TOPIC sent before HELLO_OK is answered after it")
}

// TestTopicDeclaredAgain: a producer that forgot an idle topic declares it
// again under its id and name, and learns where its sequence IDs go on:
// the highest stored or queued on the connection.
func TestTopicDeclaredAgain(t *testing.T) {
	b, _ := newBroker(t)
	c := newConn(t, b)
	c.hello(t, "p")
	assert.Equal(t, uint64(5), c.send(t, 0, 1, 5))
	assert.Equal(t, uint64(5), c.topic(t, 0, wire.DefaultTopic), "declared again: where its IDs go on")
	assert.Equal(t, uint64(7), c.send(t, 1, 6, 2), "the topic stays open")
}
