package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/server"
	"github.com/inflightmq/inflight/transport/tcp"
	"github.com/inflightmq/inflight/wire"
)

// blockingStore blocks the Appends of one producer name until release is
// closed.
type blockingStore struct {
	broker.Store
	name    string
	release chan struct{}
	blocked chan struct{} // closed when an Append of name started waiting
	once    sync.Once
}

func (s *blockingStore) Append(topic, producer string, epoch uint64, recs []broker.Record) error {
	if producer == s.name {
		s.once.Do(func() { close(s.blocked) })
		<-s.release
	}
	return s.Store.Append(topic, producer, epoch, recs)
}

// TestSlowStoreDoesNotStallOtherProducers: one producer's Append blocks for
// 3 s. Another producer on the same server keeps being acknowledged
// meanwhile, and neither connection misses a heartbeat (the blocked one's
// PINGs are answered by its reader while its appender waits): no
// reconnect, no ErrHeartbeat. Then the blocked records are stored.
func TestSlowStoreDoesNotStallOtherProducers(t *testing.T) {
	mem := broker.NewMemoryStore()
	store := &blockingStore{Store: mem, name: "slow", release: make(chan struct{}), blocked: make(chan struct{})}
	b, err := broker.New(store)
	require.NoError(t, err)
	srv, err := server.New("127.0.0.1:0", b)
	require.NoError(t, err)
	defer srv.Close(context.Background())
	// Runs before the server's Close if a check fails while the Append is
	// held, so that Close does not wait for it.
	release := sync.OnceFunc(func() { close(store.release) })
	defer release()
	d, err := tcp.NewDialer(srv.Addr().String())
	require.NoError(t, err)

	// Four intervals in the block: a blocked reader would miss two of them
	// well before it ends, and a PONG has half an interval or more to come
	// back (at 300ms, 150ms: on a loaded host under -race a PONG, or the
	// heartbeat's own wake-up, can be late by that much).
	const heartbeat = 750 * time.Millisecond
	opts := []core.Option{core.Heartbeat(heartbeat), core.SendTimeout(time.Minute)}
	slow, slowLog := testkit.NewProducer(t, d, d.Close, "slow", opts...)
	fast, fastLog := testkit.NewProducer(t, d, func() error { return nil }, "fast", opts...)

	slowDone := make(chan error, 1)
	require.NoError(t, slow.SendAsync(context.Background(), &core.Message{Payload: []byte("blocked")},
		func(_ core.MessageID, _ *core.Message, err error) { slowDone <- err }))
	select {
	case <-store.blocked:
	case <-time.After(waitTimeout):
		t.Fatal("the slow producer's Append never started")
	}
	blockedAt := time.Now()

	// While it is blocked, the other producer stores one message after
	// another, each acknowledged within a fraction of the block.
	var slowest time.Duration
	for time.Since(blockedAt) < 3*time.Second {
		start := time.Now()
		_, err := fast.Send(context.Background(), &core.Message{Payload: []byte("fast")})
		require.NoError(t, err)
		slowest = max(slowest, time.Since(start))
		time.Sleep(20 * time.Millisecond) // pacing, not waiting for an event
	}
	release()
	select {
	case err := <-slowDone:
		require.NoError(t, err)
	case <-time.After(waitTimeout):
		t.Fatal("the blocked message was never acknowledged")
	}

	t.Logf("%d messages of the other producer stored during the 3 s block; the slowest took %v",
		mem.Len("fast"), slowest)
	assert.Greater(t, mem.Len("fast"), 50)
	assert.Less(t, slowest, time.Second, "an acknowledgement held up by the other producer's Append")
	for name, p := range map[string]*core.Producer{"slow": slow, "fast": fast} {
		assert.Zero(t, p.Stats().Reconnects, "%s reconnected", name)
	}
	assert.False(t, slowLog.Has(core.ErrHeartbeat), "the blocked connection missed heartbeats: %v", slowLog.Snapshot())
	assert.False(t, fastLog.Has(core.ErrHeartbeat), "%v", fastLog.Snapshot())
	assert.Equal(t, 1, mem.Len("slow"))
}

// heldFence is a Store whose Fence of one producer name waits until the
// test opens the gate: a Fence that takes as long as the test likes (a
// JetStream round trip that hangs).
type heldFence struct {
	broker.Store
	name    string
	entered chan struct{} // closed when a Fence of name started waiting
	gate    chan struct{} // closed by the test: the Fence goes on
	once    sync.Once
}

func (s *heldFence) Fence(producer string, epoch uint64) error {
	if producer == s.name {
		s.once.Do(func() { close(s.entered) })
		<-s.gate
	}
	return s.Store.Fence(producer, epoch)
}

// TestHelloDoesNotBlockReader: while a HELLO's Fence is held (in the
// issue's words, for 3 s: here until the test has checked everything
// else), the connection's reader goes on answering PINGs, and HELLOs of
// other names on other connections are answered at once. When the Fence
// returns, the held HELLO gets its HELLO_OK and its TOPIC, sent meanwhile,
// its TOPIC_OK.
func TestHelloDoesNotBlockReader(t *testing.T) {
	store := &heldFence{Store: broker.NewMemoryStore(), name: "held", entered: make(chan struct{}), gate: make(chan struct{})}
	b, err := broker.New(store)
	require.NoError(t, err)
	srv, err := server.New("127.0.0.1:0", b)
	require.NoError(t, err)
	defer srv.Close(context.Background())
	open := sync.OnceFunc(func() { close(store.gate) })
	defer open() // before the server's Close, which waits for the Fence

	held := dialPlain(t, srv.Addr().String())
	held.write(helloBytes(t, "held"))
	testkit.WaitChan(t, store.entered, "the HELLO's Fence")
	held.write(testkit.TopicFrame(t, 0, wire.DefaultTopic)) // waits for the HELLO, on the session's goroutine

	for nonce := range uint64(3) {
		held.write(wire.AppendPing(nil, wire.Ping{Nonce: nonce}))
		p, err := wire.DecodePong(held.read())
		require.NoError(t, err, "the reader of the connection whose Fence is held answers a PING")
		assert.Equal(t, nonce, p.Nonce)
	}
	for i := range 3 {
		other := dialPlain(t, srv.Addr().String())
		other.hello(fmt.Sprintf("other-%d", i)) // HELLO_OK and TOPIC_OK
	}
	// All of the above was answered while the Fence was held: the held
	// connection has had nothing but PONGs (a HELLO_OK first would have
	// failed DecodePong).
	open()
	testkit.HelloOK(t, held.read())
	assert.Zero(t, testkit.TopicOK(t, held.read()).LastSeq)
}
