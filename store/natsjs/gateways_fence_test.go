package natsjs_test

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/store/natsjs"
	"github.com/inflightmq/inflight/store/natsjs/natsjstest"
	"github.com/inflightmq/inflight/transport/mem"
)

// twin is a producer of TestTwoGatewaysFence and what its messages got. A
// payload is the producer's tag and the message's index.
type twin struct {
	tag  byte
	p    *core.Producer
	mu   sync.Mutex
	ids  map[uint32]core.MessageID
	errs map[uint32]error
	wg   sync.WaitGroup
}

func newTwin(tag byte, p *core.Producer) *twin {
	return &twin{tag: tag, p: p, ids: map[uint32]core.MessageID{}, errs: map[uint32]error{}}
}

// send sends messages from..to-1; every one must be accepted.
func (tw *twin) send(t testing.TB, from, to uint32) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := tw.sendOne(i); err != nil {
			t.Fatalf("%c: SendAsync %d: %v", tw.tag, i, err)
		}
	}
}

// sendOne sends message i; SendAsync's error counts as its outcome.
func (tw *twin) sendOne(i uint32) error {
	tw.wg.Add(1)
	err := tw.p.SendAsync(context.Background(), &core.Message{Payload: binary.BigEndian.AppendUint32([]byte{tw.tag}, i)},
		func(id core.MessageID, _ *core.Message, err error) {
			defer tw.wg.Done()
			tw.mu.Lock()
			defer tw.mu.Unlock()
			if err != nil {
				tw.errs[i] = err
			} else {
				tw.ids[i] = id
			}
		})
	if err != nil {
		tw.mu.Lock()
		tw.errs[i] = err
		tw.mu.Unlock()
		tw.wg.Done()
	}
	return err
}

func (tw *twin) wait(t testing.TB) {
	t.Helper()
	done := make(chan struct{})
	go func() { tw.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("%c: not every callback ran in 60s", tw.tag)
	}
}

// TestTwoGatewaysFence: a producer P1 writes through gateway A, and a new
// instance of its name, P2, starts on gateway B while A holds a write of P1
// in flight. P2's first connection fences P1 through the stream. A's write
// is let go before B's fence, after it, or after P2 wrote more records than
// the held write has: either it lands before the fence, and P2's records
// come after it, or it is refused (its compare-and-set fails, and the tail
// it then reads has P2's epoch), and its messages fail with ErrFenced,
// never acknowledged as the duplicates of the P2 records that hold their
// sequence IDs. P1 is fenced at its next write in every case.
func TestTwoGatewaysFence(t *testing.T) {
	c := startCluster(t, 1, natsjstest.Options{})
	ensureStream(t, c, natsjs.StreamConfig{})
	for _, l := range []natsjs.Layout{natsjs.LayoutPacked, natsjs.LayoutNative} {
		for _, when := range []string{"before", "after-fence", "after-writes"} {
			t.Run(l.String()+"/"+when, func(t *testing.T) { gatewaysFence(t, c, l, when) })
		}
	}
}

func gatewaysFence(t *testing.T, c *natsjstest.Cluster, l natsjs.Layout, when string) {
	const warm, held, more = 200, 100, 300
	name := "fence-" + l.String() + "-" + when
	a := newHeldGateway(t, c, l)
	letGo := func() { a.letGo(t) }
	bB, _ := gateway(t, c, natsjs.Config{Layout: l}, nil)
	dA, dB := mem.NewDialer(a.b), mem.NewDialer(bB)
	defer dA.Close()
	defer dB.Close()

	// Linger lets the held batch fill up to its size.
	p1 := newTwin('1', newProducer(t, dA, name, core.MaxBatchMessages(held), core.Linger(20*time.Millisecond)))
	p1.send(t, 0, warm)
	if err := p1.p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.arm()
	p1.send(t, warm, warm+held)
	a.waitHeld(t)
	if when == "before" {
		letGo()
		if err := p1.p.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	connected := make(chan core.Event, 1)
	p2 := newTwin('2', newProducer(t, dB, name, core.OnEvent(func(ev core.Event) {
		if ev.Kind == core.EventConnected {
			select {
			case connected <- ev:
			default:
			}
		}
	})))
	select {
	case ev := <-connected:
		if ev.Epoch != 2 {
			t.Errorf("P2's epoch %d, want 2", ev.Epoch)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("P2 never connected")
	}
	switch when {
	case "after-fence":
		letGo()
		p2.send(t, 0, more)
	case "after-writes":
		p2.send(t, 0, more)
		if err := p2.p.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		letGo()
	default:
		p2.send(t, 0, more)
	}
	if err := p2.p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	// P1's next write, through A, is refused by the stream: P1 is fenced
	// (if it was not already, by the refusal of its held write).
	_ = p1.sendOne(warm + held)
	p1.wait(t)
	err := p1.p.SendAsync(context.Background(), &core.Message{}, func(core.MessageID, *core.Message, error) {})
	if !errors.Is(err, core.ErrFenced) {
		t.Errorf("P1's send after the fence: %v, want ErrFenced", err)
	}
	closeProducer(t, p1.p)
	closeProducer(t, p2.p)
	p2.wait(t)

	if len(p2.ids) != more {
		t.Errorf("P2: %d of %d stored (failures %v)", len(p2.ids), more, p2.errs)
	}
	for i, err := range p1.errs {
		if !errors.Is(err, core.ErrFenced) {
			t.Errorf("P1 %d: %v, want ErrFenced", i, err)
		}
	}
	wantFenced := held + 1
	if when == "before" {
		wantFenced = 1
	}
	if len(p1.errs) != wantFenced || len(p1.ids) != warm+held+1-wantFenced {
		t.Errorf("P1: %d stored, %d fenced; want %d fenced", len(p1.ids), len(p1.errs), wantFenced)
	}
	if when != "before" && a.s.Stats().Conflicts == 0 {
		t.Error("A's held write did not lose its compare-and-set: the race did not happen")
	}

	// The stream: each success once, at its ID, as its own producer's
	// record; P1's records all before P2's; sequence IDs growing.
	bySeq := map[uint64]string{}
	var prev uint64
	var last byte
	eachRecord(t, c, a.s.Subject(testTopic, name), func(_ uint64, r broker.Record) {
		if r.Seq <= prev {
			t.Errorf("seq %d after %d", r.Seq, prev)
		}
		prev = r.Seq
		if _, dup := bySeq[r.Seq]; dup || len(r.Payload) != 5 {
			t.Errorf("seq %d: payload %q, stored twice or foreign", r.Seq, r.Payload)
		}
		if last == '2' && r.Payload[0] == '1' {
			t.Errorf("seq %d: a record of P1 after P2's", r.Seq)
		}
		last = r.Payload[0]
		bySeq[r.Seq] = string(r.Payload)
	})
	for _, tw := range []*twin{p1, p2} {
		for i, id := range tw.ids {
			if got, want := bySeq[uint64(id)], string(binary.BigEndian.AppendUint32([]byte{tw.tag}, i)); got != want {
				t.Errorf("%c %d acknowledged as seq %d, which holds %q", tw.tag, i, id, got)
			}
		}
	}
	t.Logf("P1: %d stored, %d fenced; P2: %d stored; A %+v", len(p1.ids), len(p1.errs), len(p2.ids), a.s.Stats())
}

// TestGatewaysFenceEveryTopic: one writer per name across topics and
// gateways. P1 writes topics a and b through gateway A; a new instance P2
// of its name writes only topic c through gateway B. P1 is then fenced on
// every topic, through its own gateway: a and b, and d, which it never
// wrote (the fence is the name's, on a subject of its own that every write
// of every topic checks). Nothing of P1's is stored after the fence.
func TestGatewaysFenceEveryTopic(t *testing.T) {
	c := startCluster(t, 1, natsjstest.Options{})
	ensureStream(t, c, natsjs.StreamConfig{})
	bA, sA := gateway(t, c, natsjs.Config{}, nil)
	bB, _ := gateway(t, c, natsjs.Config{}, nil)
	dA, dB := mem.NewDialer(bA), mem.NewDialer(bB)
	defer dA.Close()
	defer dB.Close()
	ctx := context.Background()
	const name = "every-topic"

	closeSoon := func(p *core.Producer) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	}
	p1 := newProducer(t, dA, name)
	defer closeSoon(p1)
	for _, topic := range []string{"a", "b"} {
		if _, err := p1.Send(ctx, &core.Message{Topic: topic, Payload: []byte("p1 " + topic)}); err != nil {
			t.Fatalf("P1 on %s: %v", topic, err)
		}
	}
	p2 := newProducer(t, dB, name)
	defer closeSoon(p2)
	if _, err := p2.Send(ctx, &core.Message{Topic: "c", Payload: []byte("p2 c")}); err != nil {
		t.Fatalf("P2 on c: %v", err)
	}
	for _, topic := range []string{"a", "b", "d"} {
		_, err := p1.Send(ctx, &core.Message{Topic: topic, Payload: []byte("p1 late " + topic)})
		if !errors.Is(err, core.ErrFenced) {
			t.Fatalf("P1 on %s after P2 started: %v, want ErrFenced", topic, err)
		}
	}
	for topic, want := range map[string]uint64{"a": 1, "b": 1, "c": 1, "d": 0} {
		st, err := sA.State(topic, name)
		if err != nil {
			t.Fatal(err)
		}
		if st.LastSeq != want {
			t.Errorf("topic %s: last seq %d, want %d (nothing of P1's after the fence)", topic, st.LastSeq, want)
		}
	}
}
