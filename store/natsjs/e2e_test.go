package natsjs_test

import (
	"context"
	"encoding/binary"
	"flag"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/store/natsjs"
	"github.com/inflightmq/inflight/store/natsjs/natsjstest"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/transport/mem"
)

var (
	leaderLossRecords = flag.Int("leaderloss.records", 200_000, "records sent in TestNativeExactlyOnceAcrossLeaderLoss (the issue's figure is 1000000)")
	storeTimeout      = flag.Duration("store.timeout", 2*time.Second, "the store's publish timeout in the end-to-end tests")
)

const testTopic = "orders"

// outcome records what a producer reported: every callback, per payload
// index (a payload starts with its index, big-endian).
type outcome struct {
	mu        sync.Mutex
	state     []uint8 // per index: 0 none, 1 success, 2 failure
	calls     atomic.Int64
	twice     int
	disorder  int // successes with an ID not above the previous success's
	lastID    core.MessageID
	successes atomic.Int64
	lastOK    time.Time
	maxPause  time.Duration // longest time between two successes
}

func newOutcome(n int) *outcome { return &outcome{state: make([]uint8, n)} }

func (o *outcome) callback(idx int) core.Callback {
	return func(id core.MessageID, _ *core.Message, err error) {
		o.calls.Add(1)
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.state[idx] != 0 {
			o.twice++
		}
		if err != nil {
			o.state[idx] = 2
			return
		}
		o.state[idx] = 1
		o.successes.Add(1)
		if id <= o.lastID {
			o.disorder++
		}
		o.lastID = id
		now := time.Now()
		if !o.lastOK.IsZero() {
			o.maxPause = max(o.maxPause, now.Sub(o.lastOK))
		}
		o.lastOK = now
	}
}

func payload(idx, size int) []byte {
	b := make([]byte, max(size, 8))
	binary.BigEndian.PutUint64(b, uint64(idx))
	return b
}

// send sends payloads from..to-1; it reports a refused send with t.Errorf
// (it may run on a goroutine of its own) and stops there.
func (o *outcome) send(t testing.TB, p *core.Producer, from, to, size int) {
	for i := from; i < to; i++ {
		if err := p.SendAsync(context.Background(), &core.Message{Payload: payload(i, size)}, o.callback(i)); err != nil {
			t.Errorf("SendAsync %d: %v", i, err)
			return
		}
	}
}

// holdTimeout bounds how long a held sender waits for its test to release
// it.
const holdTimeout = 3 * time.Minute

// sendHeld sends the records of indices [0, to) like send, on a goroutine of
// its own, but stops before each index of holdAt until the test releases
// that hold: a test that injects a fault and then waits for more successes
// releases one after the fault, so that records are left to send and store
// after it however fast the ones before it were stored. It returns a
// channel closed once the sender returned, and release(n), which releases
// the first n holds; the test's cleanup releases them all, and a sender
// released after the test failed stops there.
func (o *outcome) sendHeld(t testing.TB, p *core.Producer, to, size int, holdAt ...int) (sent <-chan struct{}, release func(n int)) {
	holds := make([]chan struct{}, len(holdAt))
	for i := range holds {
		holds[i] = make(chan struct{})
	}
	var mu sync.Mutex
	released := 0
	release = func(n int) {
		mu.Lock()
		defer mu.Unlock()
		for ; released < min(n, len(holds)); released++ {
			close(holds[released])
		}
	}
	t.Cleanup(func() { release(len(holds)) })
	done := make(chan struct{})
	go func() {
		defer close(done)
		from := 0
		for i, at := range holdAt {
			o.send(t, p, from, at, size)
			select {
			case <-holds[i]:
			case <-time.After(holdTimeout):
				t.Errorf("the records from %d on were held for %v: the test never released them", at, holdTimeout)
				return
			}
			if t.Failed() {
				return
			}
			from = at
		}
		o.send(t, p, from, to, size)
	}()
	return done, release
}

// check reads the subject and proves the guarantees: every callback once,
// successes in order, every success stored once, stored in send order,
// nothing stored that was not sent.
func (o *outcome) check(t testing.TB, c servers, subject string) {
	t.Helper()
	stored := make([]uint8, len(o.state))
	var prevIdx, prevSeq uint64
	var n, dups, disorder, foreign int
	eachRecord(t, c, subject, func(_ uint64, r broker.Record) {
		idx := binary.BigEndian.Uint64(r.Payload)
		switch {
		case idx >= uint64(len(stored)):
			foreign++
			return
		case stored[idx] != 0:
			dups++
		}
		if n > 0 && (idx <= prevIdx || r.Seq <= prevSeq) {
			disorder++
		}
		stored[idx]++
		prevIdx, prevSeq = idx, r.Seq
		n++
	})
	o.mu.Lock()
	defer o.mu.Unlock()
	missing, failed := 0, 0
	for i, s := range o.state {
		if s == 1 && stored[i] == 0 {
			missing++
		}
		if s == 2 {
			failed++
		}
	}
	t.Logf("sent %d, succeeded %d, failed %d, stored %d; longest pause between successes %v",
		len(o.state), o.successes.Load(), failed, n, o.maxPause.Round(time.Millisecond))
	if calls := o.calls.Load(); calls != int64(len(o.state)) {
		t.Errorf("%d callbacks for %d sends", calls, len(o.state))
	}
	if o.twice > 0 {
		t.Errorf("%d callbacks ran twice", o.twice)
	}
	if o.disorder > 0 {
		t.Errorf("%d successes out of order", o.disorder)
	}
	if dups > 0 || disorder > 0 || foreign > 0 {
		t.Errorf("stream: %d records stored twice, %d out of order, %d never sent", dups, disorder, foreign)
	}
	if missing > 0 {
		t.Errorf("%d successes missing from the stream", missing)
	}
}

// gateway is a broker on a natsjs store: one stateless gateway, in process.
// after, if not nil, runs after every Append of the store.
func gateway(t testing.TB, c servers, cfg natsjs.Config, after func()) (*broker.Broker, *natsjs.Store) {
	t.Helper()
	s := newStore(t, c, cfg)
	var store broker.Store = s
	if after != nil {
		store = hooked{s, after}
	}
	b, err := broker.New(store)
	if err != nil {
		t.Fatal(err)
	}
	return b, s
}

// hooked runs after when each Append of the Store returned.
type hooked struct {
	*natsjs.Store
	after func()
}

func (h hooked) Append(topic, producer string, epoch uint64, recs []broker.Record) error {
	defer h.after()
	return h.Store.Append(topic, producer, epoch, recs)
}

// heldGateway is a gateway whose first write after arm is held until
// letGo: a write in flight while a producer moves to another gateway.
// Held midway (newHeldGatewayMid), a fast batch is held after its first
// chunk went out.
type heldGateway struct {
	b *broker.Broker
	s *natsjs.Store

	armed, holding              atomic.Bool
	inFlight, release, resolved chan struct{} // the held write started; let it go; its Append returned
	once                        sync.Once
}

func newHeldGateway(t testing.TB, c servers, l natsjs.Layout) *heldGateway {
	t.Helper()
	g := &heldGateway{inFlight: make(chan struct{}), release: make(chan struct{}), resolved: make(chan struct{})}
	g.b, g.s = gateway(t, c, natsjs.Config{Layout: l}, func() {
		if g.holding.CompareAndSwap(true, false) {
			close(g.resolved)
		}
	})
	natsjs.SetBeforeWrite(g.s, func(string, uint64, uint64) { g.hold() })
	return g
}

// newHeldGatewayMid is newHeldGateway, holding a fast batch after its
// first chunk went out instead of before it.
func newHeldGatewayMid(t testing.TB, c servers) *heldGateway {
	t.Helper()
	g := newHeldGateway(t, c, natsjs.LayoutNative)
	natsjs.SetBeforeWrite(g.s, nil)
	natsjs.SetAfterChunk(g.s, func(string, int) { g.hold() })
	return g
}

func (g *heldGateway) hold() {
	if g.armed.CompareAndSwap(true, false) {
		g.holding.Store(true)
		close(g.inFlight)
		<-g.release
	}
}

// arm holds the next write.
func (g *heldGateway) arm() { g.armed.Store(true) }

// waitHeld waits until the armed write is held.
func (g *heldGateway) waitHeld(t testing.TB) {
	t.Helper()
	select {
	case <-g.inFlight:
	case <-time.After(30 * time.Second):
		t.Fatal("A's write never started")
	}
}

// letGo lets the held write go on and waits until its Append returned;
// later calls do nothing.
func (g *heldGateway) letGo(t testing.TB) {
	g.once.Do(func() {
		close(g.release)
		select {
		case <-g.resolved:
		case <-time.After(30 * time.Second):
			t.Error("A's held write did not resolve in 30s")
		}
	})
}

func newProducer(t testing.TB, d transport.Dialer, name string, opts ...core.Option) *core.Producer {
	t.Helper()
	opts = append([]core.Option{core.Name(name), core.SendTimeout(120 * time.Second),
		core.ReconnectBackoff(10*time.Millisecond, 200*time.Millisecond), core.ErrorHandler(func(error) {})}, opts...)
	p, err := core.New(d, append(opts, core.Topic(testTopic))...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func closeProducer(t testing.TB, p *core.Producer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// TestNativeExactlyOnceAcrossLeaderLoss: a producer sends through a
// broker on an R3 stream (the embedded mode: mem transport, broker in
// process) while the stream's leader is stopped, brought back, and the new
// leader stopped in turn. Every callback runs once, successes come in
// order, and the stream holds each success once, in order.
//
// The per-record layout (atomic batches, about a tenth of packed's speed)
// runs with a tenth of the records.
func TestNativeExactlyOnceAcrossLeaderLoss(t *testing.T) {
	for _, tc := range []struct {
		layout natsjs.Layout
		n      int
	}{
		{natsjs.LayoutNative, *leaderLossRecords / 10},
		{natsjs.LayoutPacked, *leaderLossRecords},
	} {
		t.Run(tc.layout.String(), func(t *testing.T) { leaderLoss(t, tc.layout, tc.n) })
	}
}

func leaderLoss(t *testing.T, l natsjs.Layout, n int) {
	c := startCluster(t, 3, natsjstest.Options{})
	ensureStream(t, c, natsjs.StreamConfig{Replicas: 3})
	b, s := gateway(t, c, natsjs.Config{Layout: l, Timeout: *storeTimeout}, nil)
	d := mem.NewDialer(b)
	defer d.Close()
	p := newProducer(t, d, "leader-loss")
	o := newOutcome(n)
	t0 := time.Now()
	// Records are left for the new leader and for after the second stop,
	// however fast the first ones are stored.
	sent, release := o.sendHeld(t, p, n, 100, n*6/10, n*9/10)

	waitFor(t, 60*time.Second, "a tenth stored", func() bool { return o.successes.Load() >= int64(n/10) })
	first := c.StreamLeader(streamName)
	c.Stop(first)
	t.Logf("stopped stream leader n%d after %v, %d succeeded", first, time.Since(t0).Round(time.Millisecond), o.successes.Load())
	waitFor(t, 60*time.Second, "a new stream leader", func() bool { l := c.StreamLeader(streamName); return l >= 0 && l != first })
	if err := c.Restart(first); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the restarted server to catch up", func() bool { return c.StreamCurrent(first, streamName) })
	at := o.successes.Load()
	release(1)
	waitFor(t, 60*time.Second, "successes under the new leader", func() bool { return o.successes.Load() > at })
	second := c.StreamLeader(streamName)
	c.Stop(second)
	t.Logf("stopped stream leader n%d after %v, %d succeeded", second, time.Since(t0).Round(time.Millisecond), o.successes.Load())
	release(2)
	<-sent
	closeProducer(t, p)
	el := time.Since(t0)
	bs, ss := b.Stats(), s.Stats()
	t.Logf("%d records in %v (%.0f/s) with two leader losses; broker: %d batches, %d stored, %d duplicates, %d store errors; store %+v",
		n, el.Round(time.Millisecond), float64(n)/el.Seconds(), bs.Batches, bs.Stored, bs.Duplicates, bs.ProtocolErrors, ss)
	o.check(t, c, s.Subject(testTopic, "leader-loss"))
}

// TestNativeTwoGatewaysRace: gateway A holds a write in flight while its producer
// moves to gateway B, which learns the tail from the stream and stores the
// resent records. A's write is then let go before B writes, while B writes,
// or after B wrote everything: its compare-and-set fails where B got there
// first, A drops what B stored, and every record is stored once, in order.
// The native layout runs on R3 (atomic batches) and on R1 (fast batches).
func TestNativeTwoGatewaysRace(t *testing.T) {
	r3 := startCluster(t, 3, natsjstest.Options{})
	ensureStream(t, r3, natsjs.StreamConfig{Replicas: 3})
	r1 := startCluster(t, 1, natsjstest.Options{})
	ensureStream(t, r1, natsjs.StreamConfig{Replicas: 1})
	for _, tc := range []struct {
		name string
		c    *natsjstest.Cluster
		l    natsjs.Layout
	}{
		{"native/R3", r3, natsjs.LayoutNative},
		{"native/R1", r1, natsjs.LayoutNative},
		{"packed/R3", r3, natsjs.LayoutPacked},
	} {
		whens := []string{"before", "during", "after"}
		if tc.name == "native/R1" {
			whens = append(whens, "midbatch")
		}
		for _, when := range whens {
			t.Run(tc.name+"/"+when, func(t *testing.T) { twoGateways(t, tc.c, tc.l, tc.name+"-"+when) })
		}
	}
}

func twoGateways(t *testing.T, c *natsjstest.Cluster, l natsjs.Layout, name string) {
	when := name[strings.LastIndexByte(name, '-')+1:]
	const (
		warm  = 1000  // records through A before its write is held
		held  = 500   // records in A's held write (the producer's batch)
		total = 12000 // records in all
	)
	producer := "race-" + strings.ReplaceAll(name, "/", "-")
	// A's first write after the warm-up is held until letGo: before it
	// goes out, or ("midbatch") after its first chunk (a fast batch, some
	// of it stored: the rest would land among B's records unless B's
	// claim of the fence refuses it).
	a := newHeldGateway(t, c, l)
	if when == "midbatch" {
		a = newHeldGatewayMid(t, c)
	}
	letGo := func() { a.letGo(t) }
	// B writes smaller messages than A's held one, so that A's stale write
	// overlaps B's partly. "before": A goes on when B is about to write
	// for the first time (B read the tail before A's write landed);
	// "during": when B has written part of what A holds.
	bB, sB := gateway(t, c, natsjs.Config{Layout: l, MaxRecords: 100, MaxBatch: 100}, nil)
	if fast := strings.HasPrefix(name, "native/R1"); natsjs.UsesFastBatch(sB) != fast {
		t.Fatalf("%s: the store writes fast batches: %v, want %v", name, !fast, fast)
	}
	natsjs.SetBeforeWrite(sB, func(_ string, first, _ uint64) {
		if when == "before" || (when == "during" || when == "midbatch") && first > warm+held/2 {
			letGo()
		}
	})
	d := mem.NewDialer(a.b)
	defer d.Close()
	// Linger lets the held batch fill up to its size.
	p := newProducer(t, d, producer, core.MaxBatchMessages(held), core.Linger(20*time.Millisecond))
	o := newOutcome(total)
	o.send(t, p, 0, warm, 100)
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.arm()
	o.send(t, p, warm, warm+held, 100)
	a.waitHeld(t)
	if when == "midbatch" {
		waitFor(t, 30*time.Second, "A's first chunk stored", func() bool {
			st, err := sB.State(testTopic, producer)
			return err == nil && st.LastSeq == warm+natsjs.FirstChunk
		})
	}
	d.SetBroker(bB) // the producer moves to B; A's write is still in flight
	d.DropConnections()
	o.send(t, p, warm+held, total, 100)
	if when == "after" {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		letGo()
	}
	closeProducer(t, p)
	letGo() // in case B never wrote past the mark (the test has failed then)
	as, bs := a.s.Stats(), sB.Stats()
	t.Logf("A: %+v; B: %+v", as, bs)
	if as.Conflicts+bs.Conflicts == 0 {
		t.Errorf("no compare-and-set failed: the race did not happen")
	}
	o.check(t, c, a.s.Subject(testTopic, producer))
}

// TestMetadataThroughBroker: a record's topic, key, headers and event time
// go from core.Message through the broker into the stream, in both layouts.
func TestMetadataThroughBroker(t *testing.T) {
	c := startCluster(t, 1, natsjstest.Options{})
	ensureStream(t, c, natsjs.StreamConfig{})
	at := time.Date(2026, 12, 3, 10, 0, 0, 42, time.UTC)
	msgs := []core.Message{
		{Payload: []byte("plain")},
		{Payload: []byte("keyed"), Key: []byte("order-42")},
		{Payload: []byte("all"), Key: []byte("k"), EventTime: at,
			Headers: []core.Header{{Key: "trace", Value: []byte("abc")}, {Key: "trace", Value: []byte("def")}}},
	}
	for _, l := range []natsjs.Layout{natsjs.LayoutPacked, natsjs.LayoutNative} {
		t.Run(l.String(), func(t *testing.T) {
			b, s := gateway(t, c, natsjs.Config{Layout: l}, nil)
			d := mem.NewDialer(b)
			defer d.Close()
			p := newProducer(t, d, "meta-"+l.String())
			for i := range msgs {
				if _, err := p.Send(context.Background(), &msgs[i]); err != nil {
					t.Fatal(err)
				}
			}
			closeProducer(t, p)
			got := records(readSubject(t, c, s.Subject(testTopic, "meta-"+l.String())))
			if len(got) != len(msgs) {
				t.Fatalf("%d records stored, want %d", len(got), len(msgs))
			}
			for i, m := range msgs {
				want := broker.Record{Seq: uint64(i + 1), Payload: m.Payload, Key: m.Key, Headers: m.Headers, EventTime: m.EventTime}
				if err := sameRecord(got[i], want); err != nil {
					t.Error(err)
				}
			}
		})
	}
}
