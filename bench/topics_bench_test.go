package bench

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/transport/mem"
)

// withTopics gives msgs topics round robin over n topics ("t0", "t1", ...).
func withTopics(msgs []*core.Message, n int) []*core.Message {
	for i, m := range msgs {
		m.Topic = fmt.Sprintf("t%d", i%n)
	}
	return msgs
}

// BenchmarkTopics measures one producer writing many topics:
//
//   - mem and tcp, topics=1, 10, 1000: 100 B messages round robin over the
//     topics (SendAsync, as BenchmarkSendAsync; topics=1 names its topic on
//     every message);
//   - idle=100000: 100,000 topics written once each, then idle: the heap
//     an idle topic holds in the producer (B/idle-topic, what forgetting
//     it frees), and what stays once it is forgotten (B/forgotten-topic:
//     the connection's tables on both sides, the in-process broker's and
//     store's state, the benchmark's own messages);
//   - stalled: ten topics, one of which the broker never acknowledges
//     (its Append blocks until the run ends), beside nine healthy topics
//     alone: the nine keep their msgs/s, and the stalled topic's messages
//     fail by their deadline.
func BenchmarkTopics(b *testing.B) {
	for _, tr := range []string{"mem", "tcp"} {
		for _, n := range []int{1, 10, 1000} {
			b.Run(fmt.Sprintf("%s/topics=%d/payload=100", tr, n), func(b *testing.B) {
				run(b, open(b, tr), withTopics(messages(poolSize(100), 100), n),
					core.MaxPendingPerTopic(core.DefaultMaxPending))
			})
		}
	}
	b.Run("idle=100000", benchIdleTopics)
	b.Run("stalled/healthy=9", func(b *testing.B) { benchStalled(b, false) })
	b.Run("stalled/healthy=9,stalled=1", func(b *testing.B) { benchStalled(b, true) })
}

// idleTopics is how many topics benchIdleTopics writes.
var idleTopics = 100_000

// benchIdleTopics writes 100,000 topics once each and reports the heap
// per topic while they are idle, and once the producer forgot them.
func benchIdleTopics(b *testing.B) {
	topics := idleTopics
	env := open(b, "mem")
	for b.Loop() {
		p, err := core.New(env.Dialer, core.Name(fmt.Sprintf("idle-%d", time.Now().UnixNano())), core.TopicIdleTimeout(time.Second))
		if err != nil {
			b.Fatal(err)
		}
		before := heap()
		ctx := context.Background()
		var failed atomic.Int64
		cb := func(_ core.MessageID, _ *core.Message, err error) {
			if err != nil {
				failed.Add(1)
			}
		}
		msg := make([]core.Message, topics)
		for i := range msg {
			msg[i] = core.Message{Topic: fmt.Sprintf("idle.%d", i), Payload: []byte("x")}
			if err := p.SendAsync(ctx, &msg[i], cb); err != nil {
				b.Fatal(err)
			}
		}
		if err := p.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		idle := heap()
		for deadline := time.Now().Add(time.Minute); p.Stats().Topics > 1; {
			if time.Now().After(deadline) {
				b.Fatalf("%d topics still held", p.Stats().Topics)
			}
			time.Sleep(50 * time.Millisecond) // the producer forgets on its own clock; nothing to wait on
		}
		forgotten := heap()
		// What forgetting frees is what an idle topic costs the producer;
		// what stays is the connection's (the producer's id of the topic,
		// the broker's table, the store's state), and the messages and
		// topic names this benchmark keeps.
		b.ReportMetric(float64(idle-forgotten)/float64(topics), "B/idle-topic")
		b.ReportMetric(float64(forgotten-before)/float64(topics), "B/forgotten-topic")
		if failed.Load() != 0 {
			b.Fatalf("%d failed", failed.Load())
		}
		runtime.KeepAlive(msg)
		p.Close(ctx)
	}
}

// heap returns the live heap after a collection.
func heap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// blockTopic is a Store whose Appends of one topic block until released.
type blockTopic struct {
	broker.Store
	topic   string
	release chan struct{}
}

func (s *blockTopic) Append(topic, producer string, epoch uint64, recs []broker.Record) error {
	if topic == s.topic {
		<-s.release
	}
	return s.Store.Append(topic, producer, epoch, recs)
}

// benchStalled writes 100 B messages round robin over nine healthy topics,
// with, if stalled, a tenth topic whose Appends never return: msgs/s
// counts the healthy topics' messages.
func benchStalled(b *testing.B, stalled bool) {
	store := &blockTopic{Store: broker.NewCountingStore(), topic: "stalled", release: make(chan struct{})}
	br, err := broker.New(store)
	if err != nil {
		b.Fatal(err)
	}
	d := mem.NewDialer(br)
	defer d.Close()
	defer close(store.release)
	p, err := core.New(d, core.Name("stall"), core.SendTimeout(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(context.Background())
	var failedStalled, failedHealthy atomic.Int64
	ctx := context.Background()
	if stalled {
		stall := &core.Message{Topic: "stalled", Payload: make([]byte, 100)}
		go func() { // the stalled topic keeps trying: its share fills, then its messages time out
			for ctx.Err() == nil {
				err := p.SendAsync(ctx, stall, func(_ core.MessageID, _ *core.Message, err error) {
					if err != nil {
						failedStalled.Add(1)
					}
				})
				if err != nil {
					return // closed
				}
			}
		}()
	}
	msgs := withTopics(messages(poolSize(100), 100), 9)
	var resolved atomic.Int64
	var firstErr atomic.Pointer[error]
	cb := func(_ core.MessageID, _ *core.Message, err error) {
		if err != nil {
			failedHealthy.Add(1)
			firstErr.CompareAndSwap(nil, &err)
		}
		resolved.Add(1)
	}
	b.ReportAllocs()
	start := time.Now()
	i := 0
	for b.Loop() {
		if err := p.SendAsync(ctx, msgs[i%len(msgs)], cb); err != nil {
			b.Fatal(err)
		}
		i++
	}
	// Not Flush: it would wait for the stalled topic's deadlines too.
	for deadline := time.Now().Add(time.Minute); resolved.Load() < int64(b.N); time.Sleep(100 * time.Microsecond) {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d healthy messages resolved", resolved.Load(), b.N)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
	if failedHealthy.Load() != 0 {
		b.Fatalf("%d healthy messages failed: %v", failedHealthy.Load(), *firstErr.Load())
	}
	if stalled {
		b.ReportMetric(float64(failedStalled.Load()), "stalled-timeouts")
	}
}
