package core_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/clock"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/transport/mem"
	"github.com/inflightmq/inflight/wire"
)

// TestMessageTopicOverridesProducerTopic: a message's Topic picks its
// topic, an empty one the producer's; sequence IDs count per topic.
func TestMessageTopicOverridesProducerTopic(t *testing.T) {
	e := newEnv(t, core.Topic("home"))
	ctx := context.Background()
	for i := range 3 {
		id, err := e.p.Send(ctx, &core.Message{Payload: payload(i)})
		require.NoError(t, err)
		assert.Equal(t, core.MessageID(i+1), id, "default topic")
		id, err = e.p.Send(ctx, &core.Message{Topic: "away", Payload: payload(10 + i)})
		require.NoError(t, err)
		assert.Equal(t, core.MessageID(i+1), id, "its own sequence IDs")
	}
	id, err := e.p.Send(ctx, &core.Message{Topic: "home", Payload: payload(3)})
	require.NoError(t, err)
	assert.Equal(t, core.MessageID(4), id, "naming the producer's topic is the same as naming none")

	home := e.store.TopicRecords("home", "test-producer")
	away := e.store.TopicRecords("away", "test-producer")
	require.Len(t, home, 4)
	require.Len(t, away, 3)
	for i, r := range away {
		assert.Equal(t, uint64(i+1), r.Seq)
		assert.Equal(t, payload(10+i), r.Payload)
	}

	err = e.p.SendAsync(ctx, &core.Message{Topic: "no spaces", Payload: payload(0)}, func(core.MessageID, *core.Message, error) {
		t.Error("no callback for a refused message")
	})
	assert.ErrorIs(t, err, core.ErrInvalidMessage)
}

// TestTopicsKeepOrderPerTopic: messages of many topics, mixed, through
// dropped connections: every callback runs once, successes are in send
// order within each topic, and the broker stores each message once.
func TestTopicsKeepOrderPerTopic(t *testing.T) {
	e := newEnv(t, core.SendTimeout(time.Minute))
	const topics, n = 7, 3000
	rec := newRecorder(n)
	topicOf := func(i int) string { return fmt.Sprintf("t%d", i%topics) }
	for i := range n {
		require.NoError(t, e.p.SendAsync(context.Background(), &core.Message{Topic: topicOf(i), Payload: payload(i)}, rec.cb(i)))
		if i%700 == 350 {
			e.dialer.DropConnections()
		}
	}
	rec.wait(t)
	last := map[string]core.MessageID{}
	for _, i := range rec.order {
		o := rec.get(i)
		require.NoError(t, o.err)
		require.Equal(t, 1, o.n, "callback %d ran once", i)
		tp := topicOf(i)
		require.Greater(t, o.id, last[tp], "topic %s in order", tp)
		last[tp] = o.id
	}
	for k := range topics {
		tp := fmt.Sprintf("t%d", k)
		recs := e.store.TopicRecords(tp, "test-producer")
		want := 0
		for i := k; i < n; i += topics {
			require.Less(t, want, len(recs), "topic %s holds message %d", tp, i)
			assert.Equal(t, uint64(want+1), recs[want].Seq, "no gap, no duplicate")
			assert.Equal(t, payload(i), recs[want].Payload)
			want++
		}
		assert.Len(t, recs, want)
	}
}

// stuckStore blocks every Append of one topic until released.
type stuckStore struct {
	*broker.MemoryStore
	topic   string
	release chan struct{}
}

func (s *stuckStore) Append(topic, producer string, epoch uint64, recs []broker.Record) error {
	if topic == s.topic {
		<-s.release
	}
	return s.MemoryStore.Append(topic, producer, epoch, recs)
}

// TestStalledTopicDoesNotStallOthers: a topic whose Appends never return
// holds its share of the budget and fails by its deadline; the other
// topics go on meanwhile. The producer's clock stands still until the
// healthy topics are done, so a healthy Send that waited for the stuck
// topic's deadline would wait for ever: the watchdog fails the test then
// (a time limit on the sends instead failed on a loaded host).
func TestStalledTopicDoesNotStallOthers(t *testing.T) {
	store := &stuckStore{MemoryStore: broker.NewMemoryStore(), topic: "stuck", release: make(chan struct{})}
	b, err := broker.New(store)
	require.NoError(t, err)
	d := mem.NewDialer(b)
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	const timeout = 2 * time.Second
	p, err := core.New(d, core.Name("stall"), core.WithClock(clk), core.SendTimeout(timeout), core.MaxPending(64),
		core.BlockIfFull(true), core.Heartbeat(time.Hour))
	require.NoError(t, err)
	defer func() {
		close(store.release)
		testkit.CloseProducer(t, p, time.Second)
		_ = d.Close()
	}()
	// The stuck topic takes all it may: its share, half of MaxPending.
	var stuck sync.WaitGroup
	var stuckErrs sync.Map
	n := 0
	for ; ; n++ {
		stuck.Add(1)
		i := n
		err := p.TrySendAsync(context.Background(), &core.Message{Topic: "stuck", Payload: payload(i)}, func(_ core.MessageID, _ *core.Message, err error) {
			stuckErrs.Store(i, err)
			stuck.Done()
		})
		if err != nil {
			stuck.Done()
			require.ErrorIs(t, err, core.ErrQueueFull)
			break
		}
		require.Less(t, n, 64, "the stuck topic took more than MaxPending")
	}
	assert.Equal(t, 32, n, "the stuck topic holds its share")
	// Many more than MaxPending to the healthy topics: they flow.
	var healthy error
	watchdog(t, waitTimeout, "the healthy topics' Sends, before the stuck topic's deadline", func() {
		for i := range 2000 {
			if _, err := p.Send(context.Background(), &core.Message{Topic: fmt.Sprintf("ok%d", i%3), Payload: payload(i)}); err != nil {
				healthy = fmt.Errorf("healthy message %d: %w", i, err)
				return
			}
		}
	})
	require.NoError(t, healthy)
	assert.Zero(t, p.Stats().TimedOut, "nothing timed out: the clock stood still")
	// The stuck topic's deadline passes: each of its messages fails.
	allDone := make(chan struct{})
	go func() { stuck.Wait(); close(allDone) }()
	waitUntil(t, "the stuck topic's callbacks", func() bool {
		select {
		case <-allDone:
			return true
		default:
			clk.Advance(timeout / 4) // the sweeper may arm its timer after an Advance
			return false
		}
	})
	stuckErrs.Range(func(k, v any) bool {
		assert.ErrorIs(t, v.(error), core.ErrTimeout, "stuck message %v", k)
		return true
	})
}

// TestSharedMemoryLimitAcrossProducers: producers given one MemoryLimit
// count their pending bytes against it together.
func TestSharedMemoryLimitAcrossProducers(t *testing.T) {
	limit, err := core.NewMemoryLimit(1000)
	require.NoError(t, err)
	_, err = core.NewMemoryLimit(0)
	require.ErrorIs(t, err, core.ErrInvalidOption)

	store := broker.NewMemoryStore()
	b, err := broker.New(store)
	require.NoError(t, err)
	d := mem.NewDialer(b)
	defer d.Close()
	d.DropReceipts(true) // nothing is acknowledged: everything stays pending
	p1, err := core.New(d, core.Name("one"), core.WithMemoryLimit(limit))
	require.NoError(t, err)
	p2, err := core.New(d, core.Name("two"), core.WithMemoryLimit(limit))
	require.NoError(t, err)
	defer testkit.CloseProducer(t, p1, 100*time.Millisecond)
	defer testkit.CloseProducer(t, p2, 100*time.Millisecond)

	done := make(chan error, 2)
	cb := func(_ core.MessageID, _ *core.Message, err error) { done <- err }
	require.NoError(t, p1.TrySendAsync(context.Background(), &core.Message{Payload: make([]byte, 600)}, cb))
	assert.Equal(t, int64(600), limit.Used())
	err = p2.TrySendAsync(context.Background(), &core.Message{Topic: "other", Payload: make([]byte, 600)}, cb)
	require.ErrorIs(t, err, core.ErrQueueFull, "the other producer spent the shared limit")
	require.NoError(t, p2.TrySendAsync(context.Background(), &core.Message{Payload: make([]byte, 300)}, cb), "what is left of it is free")
	assert.Equal(t, int64(900), limit.Used())

	d.DropReceipts(false)
	d.DropConnections() // the resends are acknowledged
	for range 2 {
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(waitTimeout):
			t.Fatal("no callback")
		}
	}
	waitUntil(t, "the limit to be given back", func() bool { return limit.Used() == 0 })
}

// TestNewIncarnationFencesEveryTopic: a new instance of a name fences the
// older one on every topic, also on topics the new one never wrote.
func TestNewIncarnationFencesEveryTopic(t *testing.T) {
	store := broker.NewMemoryStore()
	b, err := broker.New(store)
	require.NoError(t, err)
	d := mem.NewDialer(b)
	defer d.Close()
	ctx := context.Background()
	old, err := core.New(d, core.Name("svc"))
	require.NoError(t, err)
	defer testkit.CloseProducer(t, old, 100*time.Millisecond)
	for _, tp := range []string{"a", "b"} {
		_, err := old.Send(ctx, &core.Message{Topic: tp, Payload: []byte(tp)})
		require.NoError(t, err)
	}

	young, err := core.New(d, core.Name("svc"))
	require.NoError(t, err)
	defer testkit.CloseProducer(t, young, time.Second)
	_, err = young.Send(ctx, &core.Message{Topic: "c", Payload: []byte("c")})
	require.NoError(t, err)

	for _, tp := range []string{"a", "b", "d"} {
		waitUntil(t, "the old instance to be fenced", func() bool {
			_, err := old.Send(ctx, &core.Message{Topic: tp, Payload: []byte("late")})
			return errors.Is(err, core.ErrFenced)
		})
	}
	assert.Len(t, store.TopicRecords("a", "svc"), 1, "nothing of the old instance stored after the fence")
	assert.Len(t, store.TopicRecords("b", "svc"), 1)
	assert.Empty(t, store.TopicRecords("d", "svc"))
}

// TestIdleTopicForgottenWithoutSeqReuse: a topic idle for
// TopicIdleTimeout is forgotten, and its next message goes on after the
// broker's last sequence ID.
func TestIdleTopicForgottenWithoutSeqReuse(t *testing.T) {
	e := newEnv(t, core.TopicIdleTimeout(20*time.Millisecond))
	ctx := context.Background()
	for i := range 3 {
		id, err := e.p.Send(ctx, &core.Message{Topic: "brief", Payload: payload(i)})
		require.NoError(t, err)
		require.Equal(t, core.MessageID(i+1), id)
	}
	require.NoError(t, e.p.Flush(ctx))
	waitUntil(t, "the idle topic to be forgotten", func() bool { return e.p.Stats().Topics == 1 })
	id, err := e.p.Send(ctx, &core.Message{Topic: "brief", Payload: payload(3)})
	require.NoError(t, err)
	assert.Equal(t, core.MessageID(4), id, "after the last one stored, not from 1 again")
	assert.Zero(t, e.p.Stats().Reconnects, "declared again on the same connection")
	assert.Empty(t, e.errs.Snapshot())
	recs := e.store.TopicRecords("brief", "test-producer")
	require.Len(t, recs, 4)
	for i, r := range recs {
		assert.Equal(t, uint64(i+1), r.Seq)
	}
}

// TestForgottenTopicsAreFreed: a forgotten topic's lane is garbage, also
// when it once waited for room in the connection's window, which listed it
// (and kept it, with its ring, for as long as the connection lived).
func TestForgottenTopicsAreFreed(t *testing.T) {
	// On a manual clock no topic is forgotten before the test moves it,
	// after every lane was watched (on the system clock, a second after
	// their messages, the sends had to outrun the forgetting).
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	e := newEnv(t, core.WithClock(clk), core.TopicIdleTimeout(time.Second), core.SendTimeout(time.Hour), core.Heartbeat(time.Hour))
	ctx := context.Background()
	const topics = 2000 // more than a window's worth: most wait for room
	for i := range topics {
		require.NoError(t, e.p.SendAsync(ctx, &core.Message{Topic: fmt.Sprintf("f%d", i), Payload: payload(i)},
			func(core.MessageID, *core.Message, error) {}))
	}
	var freed atomic.Int64
	require.Equal(t, topics, core.OnLanesFreed(e.p, func() { freed.Add(1) }))
	require.NoError(t, e.p.Flush(ctx))
	waitUntil(t, "the idle topics to be forgotten", func() bool {
		clk.Advance(time.Second) // the pump looks for idle topics every half TopicIdleTimeout
		return e.p.Stats().Topics == 1
	})
	// All but one: the producer's list of its lanes lets forgotten ones go
	// by halves (see retire), and with one lane left holds one.
	waitUntil(t, "the forgotten topics' rings freed", func() bool {
		runtime.GC()
		return freed.Load() >= topics-1
	})
}

// failTopics is a Store whose Appends of some topics always fail (a store
// error, not a refusal of the name): the broker ends those topics with a
// TOPIC_ERROR, dropping their frames.
type failTopics struct {
	*broker.MemoryStore
	bad map[string]bool
}

func (s *failTopics) Append(topic, producer string, epoch uint64, recs []broker.Record) error {
	if s.bad[topic] {
		return errors.New("this topic's disk is gone")
	}
	return s.MemoryStore.Append(topic, producer, epoch, recs)
}

// TestFailingTopicsLeaveTheWindow: topics whose store fails had frames in
// flight when the broker ended them; their messages then fail by their
// deadlines. The room those frames held in the connection's window comes
// back: a healthy topic on the same connection is written at once after.
// On a manual clock, moved only to pass the failing topics' deadlines: the
// healthy topic's Sends then have no deadline that could pass (on the
// system clock a loaded host could hold one past its SendTimeout), so one
// that waited for room in the window would wait until its context ended.
func TestFailingTopicsLeaveTheWindow(t *testing.T) {
	store := &failTopics{MemoryStore: broker.NewMemoryStore(), bad: map[string]bool{"bad1": true, "bad2": true}}
	b, err := broker.New(store)
	require.NoError(t, err)
	d := mem.NewDialer(b)
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	errs := &testkit.ErrLog{}
	p, err := core.New(d, core.Name("leaky"), core.WithClock(clk), core.SendTimeout(300*time.Millisecond), core.MaxBatchMessages(1),
		core.ReconnectBackoff(time.Minute, time.Minute), core.Heartbeat(time.Hour), core.ErrorHandler(errs.Add))
	require.NoError(t, err)
	defer func() {
		testkit.CloseProducer(t, p, time.Second)
		_ = d.Close()
	}()
	var failed sync.WaitGroup
	for _, topic := range []string{"bad1", "bad2"} {
		for i := range 2 { // two frames each (MaxBatchMessages(1))
			failed.Add(1)
			require.NoError(t, p.SendAsync(context.Background(), &core.Message{Topic: topic, Payload: payload(i)},
				func(_ core.MessageID, _ *core.Message, err error) {
					assert.ErrorIs(t, err, core.ErrTimeout)
					failed.Done()
				}))
		}
	}
	// The broker ends both topics, on their first frame's Append, before
	// any deadline passes.
	waitUntil(t, "both failing topics ended by the broker", func() bool {
		ended := 0
		for _, err := range errs.Snapshot() {
			var re *wire.RemoteError
			if errors.As(err, &re) && re.Code == wire.CodeStore {
				ended++
			}
		}
		return ended >= 2
	})
	done := make(chan struct{})
	go func() { failed.Wait(); close(done) }()
	waitUntil(t, "the failing topics' messages to time out", func() bool {
		select {
		case <-done:
			return true
		default:
			clk.Advance(100 * time.Millisecond) // the sweeper may arm its timer after an Advance
			return false
		}
	})

	// The next store retry of the bad topics is a minute away: what is in
	// flight now is only the healthy topic's.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := range 20 {
		_, err := p.Send(ctx, &core.Message{Topic: "good", Payload: payload(i)})
		require.NoError(t, err, "healthy message %d", i)
	}
	assert.Zero(t, p.Stats().Reconnects, "one connection throughout")
}

// TestSendToNewTopicFromCallback: a callback of the producer's first topic
// sends to a topic not written before, and waits for it (Send may be
// called from a callback). With MaxPendingPerTopic equal to MaxPending the
// first topic's share is the whole budget, and the message whose callback
// runs still holds its position: the budget has room for the second topic
// all the same, as it had before the first topic's exemption (which held
// its whole share until every position of it was released, and the Send
// timed out).
func TestSendToNewTopicFromCallback(t *testing.T) {
	e := newEnv(t, core.MaxPending(8), core.MaxPendingPerTopic(8), core.SendTimeout(2*time.Second), core.BlockIfFull(true))
	got := make(chan error, 1)
	require.NoError(t, e.p.SendAsync(context.Background(), &core.Message{Payload: []byte("first")},
		func(_ core.MessageID, _ *core.Message, err error) {
			assert.NoError(t, err)
			_, err = e.p.Send(context.Background(), &core.Message{Topic: "second", Payload: []byte("from a callback")})
			got <- err
		}))
	select {
	case err := <-got:
		assert.NoError(t, err)
	case <-time.After(waitTimeout):
		t.Fatal("the callback's Send did not return")
	}
}

// TestSecondTopicGetsWhatTheFirstLeaves: MaxPending is what all topics
// hold together, also when the first topic's share is the whole budget:
// with 10 of 16 pending in the first topic (the broker acknowledges
// nothing), a second topic takes the 6 left, no more, no fewer.
func TestSecondTopicGetsWhatTheFirstLeaves(t *testing.T) {
	e := newEnv(t, core.MaxPending(16), core.MaxPendingPerTopic(16), core.SendTimeout(time.Minute))
	e.dialer.DropReceipts(true)
	cb := func(core.MessageID, *core.Message, error) {}
	for range 10 {
		require.NoError(t, e.p.TrySendAsync(context.Background(), &core.Message{Payload: []byte("x")}, cb))
	}
	for i := range 6 {
		require.NoError(t, e.p.TrySendAsync(context.Background(), &core.Message{Topic: "second", Payload: []byte("y")}, cb), "message %d", i)
	}
	assert.ErrorIs(t, e.p.TrySendAsync(context.Background(), &core.Message{Topic: "second", Payload: []byte("y")}, cb), core.ErrQueueFull)
	assert.ErrorIs(t, e.p.TrySendAsync(context.Background(), &core.Message{Payload: []byte("x")}, cb), core.ErrQueueFull)
	assert.Equal(t, 16, e.p.Stats().Pending)
}

// TestFirstTopicsGetFlatRings: the producer's first topics (its Topic
// option's and the first other one) get rings whose slots are one block,
// the later ones paged rings; a forgotten topic's place goes to the next
// topic made. Messages flow alike through both kinds. The clock is
// manual: no topic is forgotten until the test moves it (with a real one,
// a loaded host once let "first" go idle before it was looked at).
func TestFirstTopicsGetFlatRings(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	e := newEnv(t, core.WithClock(clk), core.TopicIdleTimeout(time.Second), core.SendTimeout(time.Hour))
	ctx := context.Background()
	flat := func(topic string) bool {
		t.Helper()
		f, ok := core.FlatRing(e.p, topic)
		require.True(t, ok, "no lane for %q", topic)
		return f
	}
	assert.True(t, flat(core.DefaultTopic), "the Topic option's")
	for i, topic := range []string{"first", "second", "third"} {
		_, err := e.p.Send(ctx, &core.Message{Topic: topic, Payload: payload(i)})
		require.NoError(t, err)
	}
	assert.True(t, flat("first"))
	assert.False(t, flat("second"))
	assert.False(t, flat("third"))

	require.NoError(t, e.p.Flush(ctx))
	waitUntil(t, "the idle topics to be forgotten", func() bool {
		clk.Advance(time.Second) // the pump looks for idle topics every half TopicIdleTimeout
		return e.p.Stats().Topics == 1
	})
	_, err := e.p.Send(ctx, &core.Message{Topic: "fourth", Payload: payload(4)})
	require.NoError(t, err)
	assert.True(t, flat("fourth"), "the forgotten flat topic's place")
	for _, topic := range []string{"first", "second", "third", "fourth"} {
		assert.Len(t, e.store.TopicRecords(topic, "test-producer"), 1, topic)
	}
}
