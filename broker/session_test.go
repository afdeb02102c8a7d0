package broker_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/wire"
)

func TestHelloOK(t *testing.T) {
	tests := []struct {
		name        string
		brokerMax   int    // 0: default
		producerMax uint32 // announced in HELLO
		stored      uint64 // last seq already in the store for the name; 0: none
		wantLast    uint64
		wantMax     uint32
	}{
		{name: "new name", producerMax: wire.DefaultMaxFrameSize, wantMax: wire.DefaultMaxFrameSize},
		{name: "known name", producerMax: wire.DefaultMaxFrameSize, stored: 42, wantLast: 42, wantMax: wire.DefaultMaxFrameSize},
		{name: "producer smaller", producerMax: 64 << 10, wantMax: 64 << 10},
		{name: "producer larger", producerMax: 16 << 20, wantMax: wire.DefaultMaxFrameSize},
		{name: "broker smaller", brokerMax: 8 << 10, producerMax: wire.DefaultMaxFrameSize, wantMax: 8 << 10},
		{name: "both minimal", brokerMax: wire.MinMaxFrameSize, producerMax: wire.MinMaxFrameSize, wantMax: wire.MinMaxFrameSize},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []broker.Option
			if tt.brokerMax != 0 {
				opts = append(opts, broker.MaxFrameSize(tt.brokerMax))
			}
			b, store := newBroker(t, opts...)
			if tt.stored > 0 {
				require.NoError(t, store.Append(dflt, "p", 0, seqRecs(tt.stored-1, [][]byte{[]byte("a"), []byte("b")})))
			}
			c := newConn(t, b)
			defer c.Close()

			reply, err := c.handle(t, helloFrame(t, "p", tt.producerMax))
			require.NoError(t, err)
			ok := helloOK(t, reply)
			assert.Equal(t, tt.wantLast, c.topic(t, 0, dflt))
			assert.Equal(t, tt.wantMax, ok.MaxFrameSize)
			assert.Equal(t, "p", c.Producer())
			assert.False(t, c.peer.closed())
		})
	}
}

// TestBatchBeforeHello: a BATCH or a PING before HELLO is refused with
// an ERROR of code hello required; a PING must not keep a connection that
// never authenticates alive.
func TestBatchBeforeHello(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"BATCH", batchFrame(0, 1, 3)},
		{"PING", wire.AppendPing(nil, wire.Ping{Nonce: 1})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, store := newBroker(t)
			c := newConn(t, b)
			defer c.Close()

			reply, err := c.handle(t, tc.frame)
			require.ErrorIs(t, err, broker.ErrProtocol)
			assert.Equal(t, wire.CodeHelloRequired, errorFrame(t, reply).Code)
			assert.Empty(t, store.Producers())
			assert.Equal(t, "", c.Producer())
			assert.Equal(t, uint64(1), b.Stats().ProtocolErrors)
			assert.Zero(t, b.Stats().Batches)
		})
	}
}

func TestSecondHello(t *testing.T) {
	for _, second := range []string{"p", "q"} {
		t.Run("then "+second, func(t *testing.T) {
			b, _ := newBroker(t)
			c := newConn(t, b)
			defer c.Close()
			c.hello(t, "p")

			reply, err := c.handle(t, helloFrame(t, second, wire.DefaultMaxFrameSize))
			require.ErrorIs(t, err, broker.ErrProtocol)
			assert.Equal(t, wire.CodeProtocol, errorFrame(t, reply).Code)
			assert.Equal(t, "p", c.Producer(), "a refused HELLO does not rename the session")
			assert.Zero(t, b.Stats().Takeovers)
		})
	}
}

func TestDedup(t *testing.T) {
	steps := []struct {
		first       uint64
		n           int
		wantReceipt uint64
	}{
		{first: 1, n: 10, wantReceipt: 10},  // 1..10: new
		{first: 5, n: 11, wantReceipt: 15},  // 5..15: 5..10 duplicates, 11..15 new
		{first: 1, n: 10, wantReceipt: 15},  // 1..10: all duplicates
		{first: 20, n: 6, wantReceipt: 25},  // 20..25: after a gap
		{first: 25, n: 1, wantReceipt: 25},  // the last one again
		{first: 18, n: 2, wantReceipt: 25},  // 18..19: in the gap, but below the last: skipped
		{first: 26, n: 1, wantReceipt: 26},  // the next one
		{first: 10, n: 20, wantReceipt: 29}, // 10..29: 27..29 new
	}
	b, store := newBroker(t)
	c := newConn(t, b)
	defer c.Close()
	c.hello(t, "p")
	for gen, st := range steps {
		got := c.send(t, gen, st.first, st.n)
		require.Equal(t, st.wantReceipt, got, "receipt after batch %d (%d..%d)", gen, st.first, st.first+uint64(st.n)-1)
	}

	want := append(seqRange(1, 15), seqRange(20, 29)...)
	require.Equal(t, want, seqs(store, "p"))
	// Each record holds the payload of its first write: a resend never
	// overwrites or adds.
	firstGen := map[uint64]int{}
	for gen, st := range steps {
		for q := st.first; q < st.first+uint64(st.n); q++ {
			if _, ok := firstGen[q]; !ok {
				firstGen[q] = gen
			}
		}
	}
	for _, r := range store.Records("p") {
		assert.Equal(t, string(payload(firstGen[r.Seq], r.Seq)), string(r.Payload), "seq %d", r.Seq)
	}

	st := testkit.StatsAfter(t, b, uint64(len(steps)))
	assert.Equal(t, uint64(len(steps)), st.Batches)
	assert.Equal(t, uint64(len(want)), st.Stored)
	assert.Equal(t, uint64(6+10+1+2+17), st.Duplicates)
	assert.Zero(t, st.ProtocolErrors)
}

// TestDedupBrief is the exact sequence of the specification: 1..10, 5..15,
// 1..10, 20..25.
func TestDedupBrief(t *testing.T) {
	b, store := newBroker(t)
	c := newConn(t, b)
	defer c.Close()
	c.hello(t, "p")
	var receipts []uint64
	for gen, r := range [][2]uint64{{1, 10}, {5, 15}, {1, 10}, {20, 25}} {
		receipts = append(receipts, c.send(t, gen, r[0], int(r[1]-r[0]+1)))
	}
	assert.Equal(t, []uint64{10, 15, 15, 25}, receipts)
	assert.Equal(t, append(seqRange(1, 15), seqRange(20, 25)...), seqs(store, "p"))
	st := testkit.StatsAfter(t, b, 4)
	assert.Equal(t, broker.Stats{Sessions: 1, Topics: 1, Batches: 4, Stored: 21, Duplicates: 16}, st)
}

func TestPing(t *testing.T) {
	b, _ := newBroker(t)
	c := newConn(t, b)
	defer c.Close()
	c.hello(t, "p")
	for _, nonce := range []uint64{0, 1, 0xdeadbeefcafe, ^uint64(0)} {
		reply, err := c.handle(t, wire.AppendPing(nil, wire.Ping{Nonce: nonce}))
		require.NoError(t, err)
		pong, err := wire.DecodePong(reply)
		require.NoError(t, err, "want PONG, got %s", testkit.DescribeFrame(reply))
		assert.Equal(t, nonce, pong.Nonce)
	}
}

// TestTakeover: a HELLO of the same incarnation (its epoch) replaces the
// session that holds the name, as a producer that reconnected before its
// old connection was seen dead does; a new incarnation (epoch 0) fences it.
func TestTakeover(t *testing.T) {
	b, store := newBroker(t)
	a := newConn(t, b)
	defer a.Close()
	ok := a.hello(t, "p")
	require.Zero(t, ok.LastSeq)
	require.Equal(t, uint64(1), ok.Epoch)
	require.Equal(t, uint64(10), a.send(t, 0, 1, 10))

	bb := newConn(t, b)
	defer bb.Close()
	ok = bb.helloEpoch(t, "p", 1)
	require.Equal(t, uint64(10), ok.LastSeq, "B continues from A's last stored seq")
	require.Equal(t, uint64(1), ok.Epoch, "B resumes A's incarnation")
	assert.True(t, a.peer.closed(), "A's peer closed by the takeover")
	assert.False(t, bb.peer.closed())
	assert.Equal(t, uint64(1), b.Stats().Takeovers)

	// A's next batch is refused without a reply and stores nothing.
	reply, err := a.handle(t, batchFrame(1, 11, 5))
	require.ErrorIs(t, err, broker.ErrReplaced)
	assert.Nil(t, reply)
	assert.Equal(t, seqRange(1, 10), seqs(store, "p"))

	// B dedups against what A stored.
	assert.Equal(t, uint64(15), bb.send(t, 2, 5, 11))
	assert.Equal(t, seqRange(1, 15), seqs(store, "p"))

	// A closing late does not release B's name: B keeps working, and a
	// new incarnation still takes over from B, fencing it.
	a.Close()
	assert.Equal(t, uint64(16), bb.send(t, 3, 16, 1))
	c := newConn(t, b)
	defer c.Close()
	ok = c.hello(t, "p")
	assert.Equal(t, uint64(16), ok.LastSeq)
	assert.Equal(t, uint64(2), ok.Epoch)
	assert.True(t, bb.peer.closed())
	assert.Equal(t, wire.CodeFenced, errorFrame(t, bb.peer.next()).Code, "B told it is fenced")
	reply, err = bb.handle(t, batchFrame(4, 17, 1))
	require.ErrorIs(t, err, broker.ErrFenced)
	assert.Nil(t, reply)
	assert.Equal(t, uint64(2), b.Stats().Takeovers)
	assert.Equal(t, uint64(1), b.Stats().Fenced)
	assert.Equal(t, int32(1), a.peer.closes.Load(), "A was closed once")
}

// TestFencedAfterRelease: when the new incarnation closes before the old
// one sends again, the old session must still be refused, and so must its
// producer's reconnect.
func TestFencedAfterRelease(t *testing.T) {
	b, store := newBroker(t)
	a := newConn(t, b)
	defer a.Close()
	a.hello(t, "p")
	a.send(t, 0, 1, 3)

	c := newConn(t, b)
	assert.Equal(t, uint64(2), c.hello(t, "p").Epoch)
	c.Close()
	assert.Equal(t, wire.CodeFenced, errorFrame(t, a.peer.next()).Code)

	reply, err := a.handle(t, batchFrame(1, 4, 3))
	require.ErrorIs(t, err, broker.ErrFenced)
	assert.Nil(t, reply)
	assert.Equal(t, seqRange(1, 3), seqs(store, "p"))

	again := newConn(t, b)
	reply, err = again.handle(t, helloEpochFrame(t, "p", 1, false))
	require.ErrorIs(t, err, broker.ErrFenced)
	assert.Equal(t, wire.CodeFenced, errorFrame(t, reply).Code)
	assert.Equal(t, uint64(2), b.Stats().Fenced)
	assert.Zero(t, b.Stats().ProtocolErrors)
}

func TestStoreFailure(t *testing.T) {
	b, store := newBroker(t)
	c := newConn(t, b)
	c.hello(t, "p")
	require.Equal(t, uint64(5), c.send(t, 0, 1, 5))

	diskFull := errors.New("disk full")
	store.FailAppends(diskFull)
	// The topic's goroutine finds the failure: it ends the topic with a
	// TOPIC_ERROR; the connection goes on.
	reply, err := c.handle(t, batchFrame(1, 4, 6)) // 4..9
	require.NoError(t, err)
	e, err := wire.DecodeTopicError(reply) // the only reply: no receipt
	require.NoError(t, err, "want TOPIC_ERROR, got %s", testkit.DescribeFrame(reply))
	assert.Equal(t, wire.TopicError{ID: 0, Code: wire.CodeStore, Text: e.Text}, e)
	assert.Contains(t, e.Text, "disk full")
	assert.False(t, c.peer.closed())
	// A BATCH the producer sent before it read the TOPIC_ERROR is dropped.
	require.NoError(t, c.Handle(batchFrame(1, 10, 1)))
	assert.Equal(t, seqRange(1, 5), seqs(store, "p"))

	// The producer declares the topic again (the id is free) and resends.
	store.FailAppends(nil)
	require.Equal(t, uint64(5), c.topic(t, 0, dflt))
	require.Equal(t, uint64(9), c.send(t, 1, 4, 6))
	assert.Equal(t, seqRange(1, 9), seqs(store, "p"))
	st := testkit.StatsAfter(t, b, 2)
	assert.Equal(t, uint64(5+4), st.Stored)
	assert.Equal(t, uint64(2), st.Duplicates)
	assert.Equal(t, uint64(2), st.Batches, "the failed batch is not counted")
	assert.Equal(t, uint64(1), st.TopicErrors)
	assert.Zero(t, st.ProtocolErrors)
	assert.Equal(t, int64(1), st.Topics)
}

// failingStore fails LastSeq.
type failingStore struct {
	broker.Store
	err error
}

func (f failingStore) State(string, string) (broker.NameState, error) {
	return broker.NameState{}, f.err
}

func TestStoreLastSeqFailure(t *testing.T) {
	boom := errors.New("boom")
	b, err := broker.New(failingStore{Store: broker.NewMemoryStore(), err: boom})
	require.NoError(t, err)
	c := newConn(t, b)
	defer c.Close()
	reply, err := c.handle(t, helloFrame(t, "p", wire.DefaultMaxFrameSize))
	require.ErrorIs(t, err, broker.ErrStore)
	require.ErrorIs(t, err, boom)
	assert.Equal(t, wire.CodeStore, errorFrame(t, reply).Code)

	// The failed HELLO did not bind the session to the name: its peer is
	// closed and every later frame gets the failure.
	assert.True(t, c.peer.closed())
	_, err = c.handle(t, batchFrame(0, 1, 1))
	require.ErrorIs(t, err, broker.ErrStore)
}

func TestPeerSendError(t *testing.T) {
	b, store := newBroker(t)
	c := newConn(t, b)
	defer c.Close()
	c.hello(t, "p")
	gone := errors.New("peer gone")
	c.peer.mu.Lock()
	c.peer.sendErr = gone
	c.peer.mu.Unlock()
	require.NoError(t, c.Handle(batchFrame(0, 1, 2)))
	// The appender could not send the receipt: the session fails with the
	// peer's error.
	waitUntil(t, "the peer closed", c.peer.closed)
	require.ErrorIs(t, c.Handle(wire.AppendPing(nil, wire.Ping{Nonce: 1})), gone)
	// The records were stored before the receipt could not be sent: a
	// resend on the next connection is deduplicated.
	assert.Equal(t, seqRange(1, 2), seqs(store, "p"))
}

func TestSessionClose(t *testing.T) {
	b, store := newBroker(t)
	assert.Zero(t, b.Stats().Sessions)
	a := newConn(t, b)
	idle := newConn(t, b)
	assert.Equal(t, int64(2), b.Stats().Sessions)

	a.hello(t, "p")
	a.send(t, 0, 1, 7)
	a.Close()
	assert.Equal(t, int64(1), b.Stats().Sessions)
	a.Close() // idempotent
	assert.Equal(t, int64(1), b.Stats().Sessions)

	for _, frame := range [][]byte{
		batchFrame(1, 8, 1),
		helloFrame(t, "p", wire.DefaultMaxFrameSize),
		wire.AppendPing(nil, wire.Ping{Nonce: 1}),
		{0xff}, // garbage too
	} {
		reply, err := a.handle(t, frame)
		require.ErrorIs(t, err, broker.ErrSessionClosed)
		assert.Nil(t, reply, "a closed session sends nothing")
	}

	// The name was released: a new session gets it without a takeover and
	// learns the last seq from the store.
	c := newConn(t, b)
	assert.Equal(t, int64(2), b.Stats().Sessions)
	assert.Equal(t, uint64(7), c.hello(t, "p").LastSeq)
	assert.Zero(t, b.Stats().Takeovers)
	assert.False(t, a.peer.closed(), "Close does not close the peer: the transport does")

	// The same with a fresh broker on the same store (a restart).
	b2, err := broker.New(store)
	require.NoError(t, err)
	c2 := newConn(t, b2)
	assert.Equal(t, uint64(7), c2.hello(t, "p").LastSeq)
	c2.Close()

	c.Close()
	idle.Close()
	assert.Zero(t, b.Stats().Sessions)
	assert.Equal(t, seqRange(1, 7), seqs(store, "p"))
}

func TestConcurrentProducers(t *testing.T) {
	const (
		producers = 16
		batches   = 200
		perBatch  = 3
	)
	b, store := newBroker(t)
	var wg sync.WaitGroup
	for i := range producers {
		wg.Go(func() {
			name := fmt.Sprintf("p%02d", i)
			p := &fakePeer{}
			s := b.NewSession(p)
			defer s.Close()
			if err := s.Handle(helloFrame(t, name, wire.DefaultMaxFrameSize)); !assert.NoError(t, err) {
				return
			}
			if err := s.Handle(topicFrame(t, 0, dflt)); !assert.NoError(t, err) {
				return
			}
			p.waitSent(t, 2) // HELLO_OK, TOPIC_OK: then BATCHes may come
			for k := range batches {
				first := uint64(k*perBatch) + 1
				// Every fourth batch resends the previous one too.
				if k%4 == 3 {
					first -= perBatch
				}
				n := perBatch
				if k%4 == 3 {
					n = 2 * perBatch
				}
				if err := s.Handle(batchFrame(0, first, n)); !assert.NoError(t, err, "%s batch %d", name, k) {
					return
				}
			}
			s.Close() // stores what is queued, then returns
			// Frames that arrived while an Append ran share its receipt:
			// receipts increase, each at a frame's end, up to the last.
			frames := p.take()
			var last uint64
			for _, f := range frames[2:] {
				rs, err := wire.DecodeReceipts(f, nil)
				if !assert.NoError(t, err) || !assert.Len(t, rs, 1) {
					return
				}
				r := rs[0]
				assert.Greater(t, r.Seq, last, name)
				assert.Zero(t, r.Seq%perBatch, name)
				last = r.Seq
			}
			assert.Equal(t, uint64(batches*perBatch), last, name)
		})
	}
	wg.Wait()

	require.Len(t, store.Producers(), producers)
	for i := range producers {
		name := fmt.Sprintf("p%02d", i)
		assert.Equal(t, seqRange(1, batches*perBatch), seqs(store, name), name)
	}
	st := b.Stats()
	assert.Equal(t, uint64(producers*batches*perBatch), st.Stored)
	assert.Equal(t, uint64(producers*(batches/4)*perBatch), st.Duplicates)
	assert.Zero(t, st.Sessions)
}

// TestConcurrentTakeovers has several "producers" fight over one name,
// each reconnecting when replaced and resending with an overlap, as a
// producer does after a reconnect. Whatever the interleaving, every seq is
// stored once, in order.
func TestConcurrentTakeovers(t *testing.T) {
	const (
		workers  = 4
		lastSeq  = 300
		overlap  = 4
		perBatch = 8
		maxTries = 5000
	)
	b, store := newBroker(t)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for try := 0; ; try++ {
				if try == maxTries {
					t.Errorf("worker %d: no progress after %d sessions", w, maxTries)
					return
				}
				last, err := session(b, w, lastSeq, overlap, perBatch)
				if err != nil && !errors.Is(err, broker.ErrReplaced) && !errors.Is(err, broker.ErrFenced) {
					t.Errorf("worker %d: %v", w, err)
					return
				}
				if last >= lastSeq {
					return
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, seqRange(1, lastSeq), seqs(store, "shared"))
	st := b.Stats()
	assert.Equal(t, uint64(lastSeq), st.Stored)
	assert.Zero(t, st.Sessions)
	assert.Zero(t, st.ProtocolErrors)
	t.Logf("takeovers: %d, duplicates: %d", st.Takeovers, st.Duplicates)
}

// session runs one connection of a TestConcurrentTakeovers worker: HELLO,
// then batches from overlap before the broker's last seq up to lastSeq. It
// returns the highest seq the broker confirmed.
func session(b *broker.Broker, w, lastSeq, overlap, perBatch int) (uint64, error) {
	p := &fakePeer{}
	s := b.NewSession(p)
	defer s.Close()
	hello, err := wire.AppendHello(nil, wire.Hello{Version: wire.Version, MaxFrameSize: wire.DefaultMaxFrameSize, Producer: "shared"})
	if err != nil {
		return 0, err
	}
	if err := s.Handle(hello); err != nil {
		return 0, err
	}
	topic, err := wire.AppendTopic(nil, wire.Topic{Name: wire.DefaultTopic})
	if err != nil {
		return 0, err
	}
	if err := s.Handle(topic); err != nil {
		return 0, err
	}
	// A new incarnation taking over right after the HELLO may send its
	// ERROR before this session sent its HELLO_OK or TOPIC_OK.
	var acked uint64
	for _, want := range []wire.Type{wire.TypeHelloOK, wire.TypeTopicOK} {
		reply := p.next()
		if reply == nil {
			return 0, broker.ErrReplaced
		}
		if e, err := wire.DecodeError(reply); err == nil && e.Code == wire.CodeFenced {
			return 0, broker.ErrFenced
		}
		if typ, _ := wire.TypeOf(reply); typ != want {
			return 0, fmt.Errorf("worker %d: %s, want %v", w, testkit.DescribeFrame(reply), want)
		}
		if ok, err := wire.DecodeTopicOK(reply); err == nil {
			acked = ok.LastSeq
		}
	}
	for next := uint64(max(int(acked)-overlap, 0)) + 1; next <= uint64(lastSeq); {
		n := min(perBatch, lastSeq-int(next)+1)
		if err := s.Handle(batchFrame(0, next, n)); err != nil {
			return acked, err
		}
		// The receipt comes from the appender; a takeover meanwhile
		// fences this session instead.
		reply := p.next()
		if reply == nil {
			return acked, broker.ErrReplaced
		}
		if e, err := wire.DecodeError(reply); err == nil && e.Code == wire.CodeFenced {
			return acked, broker.ErrFenced
		}
		rs, err := wire.DecodeReceipts(reply, nil)
		if err != nil {
			return acked, fmt.Errorf("worker %d: %s: %w", w, testkit.DescribeFrame(reply), err)
		}
		r := rs[0]
		if r.Seq < acked || r.Seq < next+uint64(n)-1 {
			return acked, fmt.Errorf("worker %d: receipt %d after batch %d..%d, previous %d", w, r.Seq, next, next+uint64(n)-1, acked)
		}
		acked = r.Seq
		next += uint64(n)
	}
	return acked, nil
}

// TestHandleKeep: a BATCH handed over with HandleKeep is stored from the
// caller's memory, which the session releases exactly once, after the
// Append; any other frame, and a BATCH the session refuses, is released
// before HandleKeep returns.
func TestHandleKeep(t *testing.T) {
	released := make(chan []byte, 8)
	store := &keepCheckStore{MemoryStore: broker.NewMemoryStore(), released: released}
	b, err := broker.New(store)
	require.NoError(t, err)
	c := newConn(t, b)
	keep := func(frame []byte) error {
		return c.HandleKeep(frame, func() { released <- frame })
	}
	take := func(what string) []byte {
		t.Helper()
		select {
		case f := <-released:
			return f
		case <-time.After(10 * time.Second):
			t.Fatalf("%s never released", what)
			return nil
		}
	}

	hello := helloFrame(t, "p", wire.DefaultMaxFrameSize)
	require.NoError(t, keep(hello))
	require.Equal(t, hello, take("HELLO"))
	helloOK(t, c.peer.next())
	topic := topicFrame(t, 0, dflt)
	require.NoError(t, keep(topic))
	require.Equal(t, topic, take("TOPIC"))
	topicOK(t, c.peer.next())

	batch := batchFrame(0, 1, 3)
	require.NoError(t, keep(batch))
	assert.Equal(t, uint64(3), receipt(t, c.peer.next()))
	require.Equal(t, batch, take("the BATCH"), "released after its Append")
	clear(batch) // the caller reuses its memory: what was stored is a copy
	assert.Equal(t, []string{"g0-s1", "g0-s2", "g0-s3"}, payloads(store.Records("p")))
	select {
	case f := <-released:
		t.Fatalf("released twice: %x", f)
	default:
	}

	bad := batchFrame(0, 4, 1)
	bad[len(bad)-1] ^= 0xff // the CRC fails
	require.ErrorIs(t, keep(bad), broker.ErrProtocol)
	require.Equal(t, bad, take("a refused BATCH"))
}

// keepCheckStore fails an Append that comes after a release: the frame
// the records point into must still be the session's.
type keepCheckStore struct {
	*broker.MemoryStore
	released chan []byte
}

func (k *keepCheckStore) Append(topic, producer string, epoch uint64, recs []broker.Record) error {
	if n := len(k.released); n > 0 {
		return fmt.Errorf("%d frames released before the Append", n)
	}
	return k.MemoryStore.Append(topic, producer, epoch, recs)
}

func payloads(recs []broker.Record) []string {
	var s []string
	for _, r := range recs {
		s = append(s, string(r.Payload))
	}
	return s
}
