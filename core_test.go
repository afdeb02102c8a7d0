package inflight_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/leakcheck"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/server"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/transport/mem"
	"github.com/inflightmq/inflight/transport/tcp"
	"github.com/inflightmq/inflight/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leakcheck.Options()...) }

// fixture is a broker, with its store, behind one transport, and the faults
// every transport can produce.
type fixture interface {
	Dialer() transport.Dialer
	Store() *broker.MemoryStore
	Cut()  // drop every open connection; the producer redials
	Down() // the broker goes away: connections drop, dials fail
	Up()   // the broker is back, with the same store
	Close()
}

// transports is the list the suite runs against: a new transport gets the
// whole suite by adding one line here.
var transports = []struct {
	name string
	new  func(t *testing.T) fixture
}{
	{"mem", newMemFixture},
	{"tcp", newTCPFixture},
	{"stdnet", newStdnetFixture},
	{"stdnet-tls", newTLSFixture},
}

// suiteTests is the end-to-end behaviour every transport must have.
var suiteTests = []struct {
	name string
	run  func(t *testing.T, f fixture)
}{
	{"SendReceive", testSendReceive},
	{"OrderAcrossCuts", testOrderAcrossCuts},
	{"TimeoutsWhileDown", testTimeoutsWhileDown},
	{"DeliveredAfterOutage", testDeliveredAfterOutage},
	{"CloseWhileDown", testCloseWhileDown},
}

// TestSuite runs the end-to-end behaviour over every transport, each test
// with its messages spread over several topics (suiteTopics).
func TestSuite(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			for _, tc := range suiteTests {
				t.Run(tc.name, func(t *testing.T) {
					f := tr.new(t)
					defer f.Close()
					tc.run(t, f)
				})
			}
		})
	}
}

const waitTimeout = 10 * time.Second

func newProducer(t *testing.T, f fixture, opts ...core.Option) *core.Producer {
	t.Helper()
	opts = append([]core.Option{core.Name("suite"), core.ReconnectBackoff(2*time.Millisecond, 20*time.Millisecond)}, opts...)
	p, err := core.New(f.Dialer(), opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		testkit.CloseProducer(t, p, 100*time.Millisecond)
	})
	return p
}

// suiteTopics are the topics the suite's messages go to, round robin
// (message i to suiteTopics[i%len]): "" is the producer's Topic option
// (wire.DefaultTopic in the suite), the others are named by Message.Topic.
// Every guarantee the suite checks holds per topic.
var suiteTopics = []string{"", "suite.a", "suite.b"}

// topicOf is the topic message i is sent to.
func topicOf(i int) string { return suiteTopics[i%len(suiteTopics)] }

// storedTopic is the topic a message sent to topic is stored under.
func storedTopic(topic string) string {
	if topic == "" {
		return wire.DefaultTopic
	}
	return topic
}

// storedLen is how many records the store holds for name over every
// topic of the suite.
func storedLen(f fixture, name string) int {
	n := 0
	for _, topic := range suiteTopics {
		n += f.Store().TopicLen(storedTopic(topic), name)
	}
	return n
}

// tally records each message's single outcome.
type tally struct {
	mu        sync.Mutex
	outcomes  map[int]error
	twice     []int
	successes []int // in callback order, every topic
	all       sync.WaitGroup
}

func newTally() *tally { return &tally{outcomes: make(map[int]error)} }

// send sends message i to topicOf(i) and counts its outcome, from the
// callback or from SendAsync's own error.
func (tl *tally) send(t *testing.T, p *core.Producer, i int) {
	tl.all.Add(1)
	msg := &core.Message{Payload: binary.BigEndian.AppendUint32(nil, uint32(i)), Topic: topicOf(i)}
	if err := p.SendAsync(context.Background(), msg, func(_ core.MessageID, _ *core.Message, err error) { tl.record(i, err) }); err != nil {
		tl.record(i, err)
	}
}

func (tl *tally) record(i int, err error) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if _, ok := tl.outcomes[i]; ok {
		tl.twice = append(tl.twice, i)
		return
	}
	tl.outcomes[i] = err
	if err == nil {
		tl.successes = append(tl.successes, i)
	}
	tl.all.Done()
}

func (tl *tally) wait(t *testing.T) {
	t.Helper()
	testkit.WaitGroup(t, &tl.all, "every message's outcome")
	require.Empty(t, tl.twice, "messages with two outcomes")
}

// checkStore asserts, per topic, that every success is stored exactly
// once and on its topic, that nothing is stored twice, and that successes
// were reported and stored in send order. Across topics nothing is
// ordered.
func (tl *tally) checkStore(t *testing.T, f fixture) {
	t.Helper()
	last := map[string]int{}
	for _, i := range tl.successes {
		topic := topicOf(i)
		if prev, ok := last[topic]; ok {
			require.Less(t, prev, i, "successes out of order on topic %q", topic)
		}
		last[topic] = i
	}
	stored := map[int]bool{}
	for _, topic := range suiteTopics {
		prev := -1
		for _, r := range f.Store().TopicRecords(storedTopic(topic), "suite") {
			i := int(binary.BigEndian.Uint32(r.Payload))
			require.Equal(t, topic, topicOf(i), "message %d stored on the wrong topic", i)
			require.False(t, stored[i], "message %d stored twice", i)
			require.Greater(t, i, prev, "stored out of order on topic %q", topic)
			stored[i], prev = true, i
		}
	}
	for _, i := range tl.successes {
		require.True(t, stored[i], "success %d missing from the store", i)
	}
}

func testSendReceive(t *testing.T, f fixture) {
	p := newProducer(t, f)
	tl := newTally()
	const n = 5000
	for i := range n {
		tl.send(t, p, i)
	}
	tl.wait(t)
	require.Len(t, tl.successes, n)
	tl.checkStore(t, f)
	require.Equal(t, n, storedLen(f, "suite"))
	assert.Equal(t, len(suiteTopics), p.Stats().Topics, "a lane per topic")
}

func testOrderAcrossCuts(t *testing.T, f fixture) {
	p := newProducer(t, f, core.SendTimeout(time.Minute), core.MaxPending(512))
	tl := newTally()
	const n, cuts = 20000, 5
	var sent atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			tl.send(t, p, i)
			sent.Add(1)
		}
	}()
	for c := 1; c <= cuts; c++ {
		for sent.Load() < int64(c*n/(cuts+1)) {
			time.Sleep(100 * time.Microsecond)
		}
		f.Cut()
	}
	<-done
	tl.wait(t)
	require.Len(t, tl.successes, n, "every message succeeds across cuts")
	tl.checkStore(t, f)
	assert.GreaterOrEqual(t, p.Stats().Reconnects, uint64(1))
}

func testTimeoutsWhileDown(t *testing.T, f fixture) {
	const maxPending, timeout = 32, 200 * time.Millisecond
	p := newProducer(t, f, core.MaxPending(maxPending), core.SendTimeout(timeout))
	_, err := p.Send(context.Background(), &core.Message{})
	require.NoError(t, err)
	f.Down()
	tl := newTally()
	start := time.Now()
	for i := range 3 * maxPending {
		tl.send(t, p, i)
	}
	tl.wait(t)
	for i, err := range tl.outcomes {
		require.ErrorIs(t, err, core.ErrTimeout, "message %d", i)
	}
	// The last message was sent at the latest after 2 timeouts of waiting for
	// room; it resolved within its own timeout (the slack is the scheduler
	// of a loaded host under -race; the bug this guards is a timeout that
	// never fires).
	assert.Less(t, time.Since(start), 3*timeout+500*time.Millisecond)
	f.Up()
	_, err = p.Send(context.Background(), &core.Message{})
	require.NoError(t, err)
	assert.Equal(t, 2, f.Store().Len("suite"), "timed-out messages were never written")
	assert.Equal(t, 2, storedLen(f, "suite"), "timed-out messages were never written, on any topic")
}

func testDeliveredAfterOutage(t *testing.T, f fixture) {
	p := newProducer(t, f, core.SendTimeout(time.Minute))
	tl := newTally()
	for i := range 100 {
		tl.send(t, p, i)
	}
	f.Down()
	for i := 100; i < 300; i++ {
		tl.send(t, p, i)
	}
	f.Up()
	for i := 300; i < 400; i++ {
		tl.send(t, p, i)
	}
	tl.wait(t)
	require.Len(t, tl.successes, 400)
	tl.checkStore(t, f)
	require.Equal(t, 400, storedLen(f, "suite"))
}

func testCloseWhileDown(t *testing.T, f fixture) {
	p := newProducer(t, f, core.SendTimeout(time.Minute))
	_, err := p.Send(context.Background(), &core.Message{})
	require.NoError(t, err)
	f.Down()
	tl := newTally()
	for i := range 50 {
		tl.send(t, p, i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, p.Close(ctx), context.DeadlineExceeded)
	tl.wait(t)
	for i, err := range tl.outcomes {
		require.ErrorIs(t, err, core.ErrClosed, "message %d", i)
	}
	assert.ErrorIs(t, p.SendAsync(context.Background(), &core.Message{}, func(core.MessageID, *core.Message, error) {}), core.ErrClosed)
}

// memFixture: faults through the in-memory dialer's switches.
type memFixture struct {
	store  *broker.MemoryStore
	dialer *mem.Dialer
}

func newMemFixture(t *testing.T) fixture {
	store := broker.NewMemoryStore()
	b, err := broker.New(store)
	require.NoError(t, err)
	return &memFixture{store: store, dialer: mem.NewDialer(b)}
}

func (f *memFixture) Dialer() transport.Dialer   { return f.dialer }
func (f *memFixture) Store() *broker.MemoryStore { return f.store }
func (f *memFixture) Cut()                       { f.dialer.DropConnections() }
func (f *memFixture) Down()                      { f.dialer.RefuseDials(true); f.dialer.DropConnections() }
func (f *memFixture) Up()                        { f.dialer.RefuseDials(false) }
func (f *memFixture) Close()                     { f.dialer.Close() }

// tcpFixture: a real server on loopback; Down stops it, Up starts a new one
// on the same address with the same store (a broker restart).
type tcpFixture struct {
	t      *testing.T
	store  *broker.MemoryStore
	addr   string
	server *server.Server
	dialer *tcp.Dialer
}

func newTCPFixture(t *testing.T) fixture {
	f := &tcpFixture{t: t, store: broker.NewMemoryStore(), addr: "127.0.0.1:0"}
	f.Up()
	f.addr = f.server.Addr().String()
	d, err := tcp.NewDialer(f.addr)
	require.NoError(t, err)
	f.dialer = d
	return f
}

func (f *tcpFixture) Dialer() transport.Dialer   { return f.dialer }
func (f *tcpFixture) Store() *broker.MemoryStore { return f.store }
func (f *tcpFixture) Cut()                       { f.server.CloseConns() }

func (f *tcpFixture) Down() {
	require.NoError(f.t, f.server.Close(context.Background()))
}

func (f *tcpFixture) Up() {
	b, err := broker.New(f.store)
	require.NoError(f.t, err)
	f.server, err = server.New(f.addr, b)
	require.NoError(f.t, err)
}

func (f *tcpFixture) Close() {
	_ = f.server.Close(context.Background())
	_ = f.dialer.Close()
}

// TestMessageFieldsRoundTrip sends messages with every field (payload, key,
// headers with a repeated key and an empty value, event time), alone and
// together, on a topic, over every transport of the suite, and checks that
// the broker stored each field as sent, in order.
func TestMessageFieldsRoundTrip(t *testing.T) {
	hs := []core.Header{{Key: "traceparent", Value: []byte("00-4bf92f3577b34da6-00f067aa0ba902b7-01")}, {Key: "tenant", Value: []byte("acme")}, {Key: "tenant", Value: []byte{}}}
	msgs := []*core.Message{
		{Payload: []byte("payload only")},
		{Payload: []byte("key"), Key: []byte("user-17")},
		{Payload: []byte("headers"), Headers: hs},
		{Payload: []byte("event time"), EventTime: time.Date(2026, 12, 3, 9, 45, 0, 123456789, time.UTC)},
		{Payload: []byte("all"), Key: bytes.Repeat([]byte{0xff}, 16), Headers: hs[:1], EventTime: time.Unix(0, 1)},
		{Payload: nil, Key: []byte("k"), Headers: hs[1:2]},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			f := tr.new(t)
			defer f.Close()
			p := newProducer(t, f, core.Topic("eu.orders-1"))
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			for _, m := range msgs {
				_, err := p.Send(ctx, m)
				require.NoError(t, err)
			}
			got := f.Store().TopicRecords("eu.orders-1", "suite")
			require.Len(t, got, len(msgs))
			assert.Empty(t, f.Store().Records("suite"), "nothing on the default topic")
			for i, m := range msgs {
				r := got[i]
				assert.Equal(t, uint64(i+1), r.Seq)
				assert.True(t, bytes.Equal(m.Payload, r.Payload), "%d: payload %q", i, r.Payload)
				assert.True(t, bytes.Equal(m.Key, r.Key), "%d: key %q", i, r.Key)
				assert.True(t, m.EventTime.Equal(r.EventTime), "%d: event time %v, want %v", i, r.EventTime, m.EventTime)
				require.Len(t, r.Headers, len(m.Headers), "%d: headers", i)
				for j, h := range m.Headers {
					assert.Equal(t, h.Key, r.Headers[j].Key, "%d: header %d", i, j)
					assert.True(t, bytes.Equal(h.Value, r.Headers[j].Value), "%d: header %d value", i, j)
				}
			}
		})
	}
}

// TestTopicsKeepOrderPerTopic: one producer writes the suite's topics,
// mixed, over mem and over TCP, while the broker is restarted twice with
// its store (refused dials over mem, a new server on the same address over
// TCP): every callback runs once, successes keep send order within each
// topic, and each success is stored once, on its topic, in order.
func TestTopicsKeepOrderPerTopic(t *testing.T) {
	for _, tr := range transports[:2] { // mem, tcp
		t.Run(tr.name, func(t *testing.T) {
			f := tr.new(t)
			defer f.Close()
			p := newProducer(t, f, core.SendTimeout(time.Minute))
			tl := newTally()
			const n, restarts = 9000, 2
			const round = n / (restarts + 1)
			for r := range restarts + 1 {
				for i := r * round; i < (r+1)*round; i++ {
					tl.send(t, p, i)
				}
				if r == restarts {
					break
				}
				// Restarted while this round is partly acknowledged and
				// partly in flight.
				waitUntil(t, "part of the round to be acknowledged", func() bool { return p.Stats().Acked >= uint64(r*round+round/4) })
				f.Down()
				f.Up()
			}
			tl.wait(t)
			require.Len(t, tl.successes, n, "every message succeeds across the restarts")
			tl.checkStore(t, f)
			assert.GreaterOrEqual(t, p.Stats().Reconnects, uint64(restarts))
		})
	}
}
