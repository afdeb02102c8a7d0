package inflight_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/transport/mem"
	"github.com/inflightmq/inflight/wire"
)

// instance is one Producer of a test that runs several with one name, and
// what each of its messages got. A payload is the instance's tag and the
// message's index, so that the store tells whose record it holds.
type instance struct {
	t   *testing.T
	tag byte
	p   *core.Producer

	mu       sync.Mutex
	ids      map[uint32]core.MessageID // successes
	errs     map[uint32]error          // failures, from the callback or from SendAsync
	twice    int
	pending  sync.WaitGroup
	acked    atomic.Int64
	next     uint32        // the next index to send
	fenced   chan struct{} // closed at the first ErrFenced
	fenceOne sync.Once
}

func newInstance(t *testing.T, d transport.Dialer, tag byte, opts ...core.Option) *instance {
	t.Helper()
	opts = append([]core.Option{core.Name("twin"), core.SendTimeout(time.Minute),
		core.ReconnectBackoff(2*time.Millisecond, 20*time.Millisecond), core.ErrorHandler(func(error) {})}, opts...)
	p, err := core.New(d, opts...)
	require.NoError(t, err)
	in := &instance{t: t, tag: tag, p: p, ids: map[uint32]core.MessageID{}, errs: map[uint32]error{}, fenced: make(chan struct{})}
	t.Cleanup(func() { testkit.CloseProducer(t, p, time.Second) })
	return in
}

func (in *instance) record(i uint32, id core.MessageID, err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if _, ok := in.ids[i]; ok {
		in.twice++
	} else if _, ok := in.errs[i]; ok {
		in.twice++
	}
	if err != nil {
		in.errs[i] = err
		if errors.Is(err, core.ErrFenced) {
			in.fenceOne.Do(func() { close(in.fenced) })
		}
	} else {
		in.ids[i] = id
		in.acked.Add(1)
	}
}

// send sends one message and reports SendAsync's error.
func (in *instance) send() error {
	i := in.next
	in.next++
	msg := &core.Message{Payload: binary.BigEndian.AppendUint32([]byte{in.tag}, i)}
	in.pending.Add(1)
	err := in.p.SendAsync(context.Background(), msg, func(id core.MessageID, _ *core.Message, err error) {
		in.record(i, id, err)
		in.pending.Done()
	})
	if err != nil {
		in.record(i, 0, err)
		in.pending.Done()
	}
	return err
}

// wait waits until every message sent has its outcome.
func (in *instance) wait() {
	in.t.Helper()
	done := make(chan struct{})
	go func() { in.pending.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		in.t.Fatalf("instance %c: not every message got its outcome", in.tag)
	}
	require.Zero(in.t, in.twice, "instance %c: messages with two outcomes", in.tag)
}

// checkTwins checks the store against what the instances were told: every
// success is stored once, at its ID, with its own instance's payload (so
// none was acknowledged as a duplicate of another instance's record);
// nothing is stored twice; sequence IDs grow; and an instance's records
// come in one run, each instance's after the previous one's.
func checkTwins(t *testing.T, recs []broker.Record, ins ...*instance) {
	t.Helper()
	bySeq := map[uint64][]byte{}
	seen := map[string]bool{}
	var prev uint64
	var order []byte // the tags of the runs, in store order
	for _, r := range recs {
		require.Greater(t, r.Seq, prev, "sequence IDs stored out of order")
		prev = r.Seq
		require.Len(t, r.Payload, 5)
		require.False(t, seen[string(r.Payload)], "%c%d stored twice", r.Payload[0], binary.BigEndian.Uint32(r.Payload[1:]))
		seen[string(r.Payload)] = true
		bySeq[r.Seq] = r.Payload
		if len(order) == 0 || order[len(order)-1] != r.Payload[0] {
			order = append(order, r.Payload[0])
		}
	}
	tags := map[byte]bool{}
	for _, in := range ins {
		tags[in.tag] = true
		in.mu.Lock()
		for i, id := range in.ids {
			got, ok := bySeq[uint64(id)]
			if !assert.True(t, ok, "%c%d: success %d not in the store", in.tag, i, id) {
				continue
			}
			assert.Equal(t, binary.BigEndian.AppendUint32([]byte{in.tag}, i), got,
				"%c%d: acknowledged as %d, which holds another record", in.tag, i, id)
		}
		in.mu.Unlock()
	}
	runs := map[byte]bool{}
	for i, tag := range order {
		assert.True(t, tags[tag], "a record of no instance: %q", tag)
		assert.False(t, runs[tag], "runs %q: %c wrote again after %c", order, tag, order[max(i-1, 0)])
		runs[tag] = true
	}
}

// waitUntil waits for cond, failing the test after waitTimeout.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// TestTwinProducersFenced: two producers with one name, as two processes
// given the same name. The second takes the name over while the first is
// sending: the first is fenced (its pending messages fail with ErrFenced,
// and so do its later sends), and every success of either is stored once,
// at its ID, as its own record: none was acknowledged as a duplicate of the
// other's. Over mem and over TCP.
func TestTwinProducersFenced(t *testing.T) {
	for _, tr := range transports[:2] {
		t.Run(tr.name, func(t *testing.T) {
			f := tr.new(t)
			defer f.Close()
			a := newInstance(t, f.Dialer(), 'A', core.MaxPending(256))
			sending := make(chan error, 1)
			go func() {
				// A sends until it is fenced: its sends are paced by its
				// acknowledgements (MaxPending), so it is still sending
				// when B takes over.
				for range 1_000_000 {
					if err := a.send(); err != nil {
						sending <- err
						return
					}
				}
				sending <- errors.New("A was never fenced")
			}()
			waitUntil(t, "A's first successes", func() bool { return a.acked.Load() >= 500 })

			b := newInstance(t, f.Dialer(), 'B')
			const n = 2000
			for range n {
				require.NoError(t, b.send())
			}
			select {
			case err := <-sending:
				require.ErrorIs(t, err, core.ErrFenced, "A's sends fail once it is fenced")
			case <-time.After(waitTimeout):
				t.Fatal("A still sending")
			}
			err := a.p.SendAsync(context.Background(), &core.Message{}, func(core.MessageID, *core.Message, error) {})
			require.ErrorIs(t, err, core.ErrFenced, "a send after the fence fails at once")
			a.wait()
			b.wait()

			assert.Len(t, b.ids, n, "B's messages all stored")
			fenced := 0
			for i, err := range a.errs {
				require.ErrorIs(t, err, core.ErrFenced, "A%d", i)
				var re *wire.RemoteError
				require.ErrorAs(t, err, &re)
				assert.Equal(t, wire.CodeFenced, re.Code)
				fenced++
			}
			t.Logf("A: %d stored, %d fenced; B: %d stored", len(a.ids), fenced, len(b.ids))
			checkTwins(t, f.Store().Records("twin"), a, b)
		})
	}
}

// TestSequenceWrapRefused: sequence IDs stop at wire.MaxSeq. A BATCH that
// goes beyond is a protocol error for the broker, which stores nothing of
// it; a producer whose name's last stored ID is at the limit fails its
// messages with ErrSequenceExhausted at once, and redials with backoff, not
// in a loop; one near the limit sends what fits and fails the rest.
func TestSequenceWrapRefused(t *testing.T) {
	t.Run("broker", func(t *testing.T) {
		for _, first := range []uint64{wire.MaxSeq + 1, wire.MaxSeq, 1<<64 - 1} {
			store := broker.NewMemoryStore()
			b, err := broker.New(store)
			require.NoError(t, err)
			peer := &capturePeer{}
			s := b.NewSession(peer)
			hello, err := wire.AppendHello(nil, wire.Hello{Version: wire.Version, MaxFrameSize: wire.DefaultMaxFrameSize, Producer: "p"})
			require.NoError(t, err)
			require.NoError(t, s.Handle(hello))
			require.NoError(t, s.Handle(testkit.TopicFrame(t, 0, wire.DefaultTopic)))
			peer.wait(t, wire.TypeTopicOK) // a BATCH before it is refused
			var bb wire.BatchBuilder
			bb.Reset(nil, 0, first)
			bb.Add([]byte("x"))
			bb.Add([]byte("y"))
			err = s.Handle(bb.Finish())
			require.ErrorIs(t, err, broker.ErrProtocol, "first %d", first)
			require.ErrorIs(t, err, wire.ErrMalformed)
			sent := peer.sent()
			e, derr := wire.DecodeError(sent[len(sent)-1])
			require.NoError(t, derr)
			assert.Equal(t, wire.CodeProtocol, e.Code)
			assert.Contains(t, e.Text, "beyond the limit")
			s.Close()
			assert.Zero(t, store.Len("p"))
		}
	})
	t.Run("at the limit", func(t *testing.T) {
		store := broker.NewMemoryStore()
		require.NoError(t, store.Append(wire.DefaultTopic, "full", 0, []broker.Record{{Seq: wire.MaxSeq, Payload: []byte("last")}}))
		counted := &stateCounter{Store: store}
		b, err := broker.New(counted)
		require.NoError(t, err)
		d := mem.NewDialer(b)
		defer d.Close()
		const backoffMin = 5 * time.Millisecond
		start := time.Now()
		p, err := core.New(d, core.Name("full"), core.SendTimeout(time.Minute),
			core.ReconnectBackoff(backoffMin, 40*time.Millisecond), core.ErrorHandler(func(error) {}))
		require.NoError(t, err)
		defer testkit.CloseProducer(t, p, time.Second)
		_, err = p.Send(context.Background(), &core.Message{Payload: []byte("no room")})
		require.ErrorIs(t, err, core.ErrSequenceExhausted)
		assert.Less(t, time.Since(start), 10*time.Second, "failed at once, not by SendTimeout")
		// What the issue saw: thousands of handshakes a second. The topic
		// is exhausted, not the connection: the producer may keep it or
		// redial, and may declare the topic again, but each dial and each
		// declaration (a Store.State) comes at least backoffMin after the
		// one before it. Absence of a storm needs a window of time.
		time.Sleep(20 * backoffMin)
		dials, states, took := d.Dials(), counted.states.Load(), time.Since(start)
		assert.LessOrEqual(t, dials, int(took/backoffMin)+1, "%d dials in %v", dials, took)
		assert.LessOrEqual(t, states, int64(took/backoffMin)+1, "%d declarations in %v", states, took)
		t.Logf("%d dials, %d declarations in %v", dials, states, took)
		assert.Equal(t, 1, store.Len("full"), "nothing stored, nothing wrapped")
	})
	t.Run("near the limit", func(t *testing.T) {
		store := broker.NewMemoryStore()
		require.NoError(t, store.Append(wire.DefaultTopic, "near", 0, []broker.Record{{Seq: wire.MaxSeq - 2, Payload: []byte("old")}}))
		b, err := broker.New(store)
		require.NoError(t, err)
		d := mem.NewDialer(b)
		defer d.Close()
		p, err := core.New(d, core.Name("near"), core.SendTimeout(time.Minute),
			core.ReconnectBackoff(5*time.Millisecond, 20*time.Millisecond), core.ErrorHandler(func(error) {}))
		require.NoError(t, err)
		defer testkit.CloseProducer(t, p, time.Second)
		for i := range 2 {
			id, err := p.Send(context.Background(), &core.Message{Payload: fmt.Appendf(nil, "fits %d", i)})
			require.NoError(t, err)
			assert.Equal(t, core.MessageID(wire.MaxSeq-1+uint64(i)), id)
		}
		// Every later message fails at once too, not by SendTimeout: the
		// pump takes the topic's lane up again at each publish.
		for i := range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err = p.Send(ctx, &core.Message{Payload: fmt.Appendf(nil, "beyond %d", i)})
			cancel()
			require.ErrorIs(t, err, core.ErrSequenceExhausted, "message %d beyond the limit", i)
		}
		var seqs []uint64
		for _, r := range store.Records("near") {
			seqs = append(seqs, r.Seq)
		}
		assert.Equal(t, []uint64{wire.MaxSeq - 2, wire.MaxSeq - 1, wire.MaxSeq}, seqs)
	})
}

// TestWaitForName: a producer with Access(WaitForName) does not take a
// name a live producer holds: it waits, its messages pending, until the
// holder is gone, then takes the name with a new epoch. Fenced in its turn
// by a producer of the default mode, it waits again: what it had written
// and not yet had acknowledged fails with ErrFenced, what it had not
// written is sent once the name is free again, after the fencer's records.
func TestWaitForName(t *testing.T) {
	store := broker.NewMemoryStore()
	b, err := broker.New(store)
	require.NoError(t, err)
	dW, dOthers := mem.NewDialer(b), mem.NewDialer(b) // W's connection gets faults of its own
	defer dW.Close()
	defer dOthers.Close()

	a := newInstance(t, dOthers, 'A')
	for range 100 {
		require.NoError(t, a.send())
	}
	a.wait()

	refusals := make(chan error, 100)
	// W's window (MaxFramesInFlight) holds the 20 messages below whose
	// receipts are dropped however many frames the pump writes them in
	// (at the default of 4, a pump that met them one or two at a time
	// wrote 4 frames and waited for their receipts, for ever).
	w := newInstance(t, dW, 'W', core.Access(core.WaitForName), core.MaxFramesInFlight(32), core.ErrorHandler(func(err error) {
		if errors.Is(err, core.ErrNameInUse) {
			select {
			case refusals <- err:
			default:
			}
		}
	}))
	for range 50 {
		require.NoError(t, w.send())
	}
	for range 2 { // refused, backed off, refused again
		select {
		case <-refusals:
		case <-time.After(waitTimeout):
			t.Fatal("W was not refused while A holds the name")
		}
	}
	assert.Zero(t, w.acked.Load(), "W stored nothing while A holds the name")
	assert.Equal(t, 100, store.Len("twin"))

	testkit.CloseProducer(t, a.p, time.Second) // A goes: W takes the name
	w.wait()
	require.Len(t, w.ids, 50)

	// W writes 20 more, which the broker stores but whose receipts are
	// lost; then C, of the default mode, fences W: those 20 were written
	// under W's epoch and fail (they may have been stored).
	dW.DropReceipts(true)
	for range 20 {
		require.NoError(t, w.send())
	}
	waitUntil(t, "W's 20 stored", func() bool { return store.Len("twin") == 170 })
	c := newInstance(t, dOthers, 'C')
	for range 30 {
		require.NoError(t, c.send())
	}
	c.wait()
	require.Len(t, c.ids, 30)
	select {
	case <-w.fenced:
	case <-time.After(waitTimeout):
		t.Fatal("W not fenced")
	}
	dW.DropReceipts(false)
	// W waits again; what it sends meanwhile waits with it.
	for range 40 {
		require.NoError(t, w.send())
	}
	for range 2 {
		select {
		case <-refusals:
		case <-time.After(waitTimeout):
			t.Fatal("W was not refused while C holds the name")
		}
	}
	testkit.CloseProducer(t, c.p, time.Second) // C goes: W takes the name back
	w.wait()
	for i, err := range w.errs {
		require.ErrorIs(t, err, core.ErrFenced, "W%d", i)
		require.True(t, i >= 50 && i < 70, "W%d: only those written under the fenced epoch fail", i)
	}
	assert.Len(t, w.errs, 20)
	for i := uint32(70); i < 110; i++ {
		assert.Contains(t, w.ids, i, "W%d: sent while fenced, stored once the name was back", i)
	}
	checkTwinsRuns(t, store.Records("twin"), "AWCW", a, w, c)
}

// checkTwinsRuns is checkTwins for instances that took turns: the runs of
// records in the store, by tag, are want.
func checkTwinsRuns(t *testing.T, recs []broker.Record, want string, ins ...*instance) {
	t.Helper()
	var order []byte
	for _, r := range recs {
		if len(order) == 0 || order[len(order)-1] != r.Payload[0] {
			order = append(order, r.Payload[0])
		}
	}
	assert.Equal(t, want, string(order), "whose records the store holds, in runs")
	seen := map[string]bool{}
	bySeq := map[uint64][]byte{}
	var prev uint64
	for _, r := range recs {
		require.Greater(t, r.Seq, prev)
		prev = r.Seq
		require.False(t, seen[string(r.Payload)], "stored twice")
		seen[string(r.Payload)] = true
		bySeq[r.Seq] = r.Payload
	}
	for _, in := range ins {
		in.mu.Lock()
		for i, id := range in.ids {
			assert.Equal(t, binary.BigEndian.AppendUint32([]byte{in.tag}, i), bySeq[uint64(id)], "%c%d at %d", in.tag, i, id)
		}
		in.mu.Unlock()
	}
}

// TestExclusiveRefusedAtOnce: a producer with Access(Exclusive) whose name
// a live producer holds fails its pending messages at once with
// ErrNameInUse; the holder is not disturbed.
func TestExclusiveRefusedAtOnce(t *testing.T) {
	f := newMemFixture(t)
	defer f.Close()
	a := newInstance(t, f.Dialer(), 'A')
	require.NoError(t, a.send())
	a.wait()
	x := newInstance(t, f.Dialer(), 'X', core.Access(core.Exclusive))
	start := time.Now()
	require.NoError(t, x.send())
	x.wait()
	require.ErrorIs(t, x.errs[0], core.ErrNameInUse)
	assert.Less(t, time.Since(start), 10*time.Second, "failed at once, not by SendTimeout")
	require.NoError(t, a.send())
	a.wait()
	assert.Len(t, a.ids, 2, "the holder goes on")
	checkTwins(t, f.Store().Records("twin"), a)
}

// stateCounter counts the Store.State calls of a broker: one per TOPIC
// declared.
type stateCounter struct {
	broker.Store
	states atomic.Int64
}

func (c *stateCounter) State(topic, producer string) (broker.NameState, error) {
	c.states.Add(1)
	return c.Store.State(topic, producer)
}
