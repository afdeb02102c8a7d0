package broker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/wire"
)

// TestMessageFieldsRoundTrip stores records with every metadata field in a
// MemoryStore, after scribbling over the caller's buffers (stores must
// copy), and through a session on a topic. (store/file has the same for the
// file store.)
func TestMessageFieldsRoundTrip(t *testing.T) {
	t.Run("MemoryStore", func(t *testing.T) {
		m := broker.NewMemoryStore()
		in := testkit.MetaRecords()
		require.NoError(t, m.Append("eu.orders", "p", 0, in))
		testkit.Scribble(in)
		testkit.RequireSameRecords(t, testkit.MetaRecords(), m.TopicRecords("eu.orders", "p"))
		assert.Empty(t, m.Records("p"), "another topic")
	})
	t.Run("session", func(t *testing.T) {
		b, store := newBroker(t)
		c := newConn(t, b)
		defer c.Close()
		h, err := wire.AppendHello(nil, wire.Hello{Version: wire.Version, MaxFrameSize: wire.DefaultMaxFrameSize, Producer: "p"})
		require.NoError(t, err)
		reply, err := c.handle(t, h)
		require.NoError(t, err)
		helloOK(t, reply)
		c.topic(t, 0, "eu.orders")
		want := testkit.MetaRecords()[:3] // consecutive seqs, as a producer sends them
		var bb wire.BatchBuilder
		bb.Reset(nil, 0, 1)
		for _, r := range want {
			bb.AddRecord(r.Payload, r.Key, r.Headers, r.EventTime)
		}
		reply, err = c.handle(t, bb.Finish())
		require.NoError(t, err)
		assert.Equal(t, uint64(3), receipt(t, reply))
		testkit.RequireSameRecords(t, want, store.TopicRecords("eu.orders", "p"))
	})
}

// TestTopicsDeduplicateSeparately: one producer name on two topics of one
// connection has two sequences; a batch on one topic is never a duplicate
// of the other's.
func TestTopicsDeduplicateSeparately(t *testing.T) {
	b, store := newBroker(t)
	c := newConn(t, b)
	defer c.Close()
	reply, err := c.handle(t, helloFrame(t, "p", wire.DefaultMaxFrameSize))
	require.NoError(t, err)
	helloOK(t, reply)
	assert.Equal(t, uint64(0), c.topic(t, 1, "a"))
	assert.Equal(t, uint64(0), c.topic(t, 2, "c"))
	send := func(id uint32, gen int, first uint64, n int) wire.Receipt {
		reply, err := c.handle(t, topicBatch(id, gen, first, n))
		require.NoError(t, err)
		rs := receipts(t, reply)
		require.Len(t, rs, 1)
		return rs[0]
	}
	assert.Equal(t, wire.Receipt{Topic: 1, Seq: 5}, send(1, 0, 1, 5))
	assert.Equal(t, wire.Receipt{Topic: 2, Seq: 3}, send(2, 1, 1, 3), "seqs 1-3 on topic c are new although 1-5 are stored on a")
	assert.Equal(t, wire.Receipt{Topic: 1, Seq: 5}, send(1, 0, 4, 2), "a resend on a is a duplicate")
	assert.False(t, c.peer.closed())
	assert.Equal(t, 5, store.TopicLen("a", "p"))
	assert.Equal(t, 3, store.TopicLen("c", "p"))
	assert.Equal(t, uint64(2), b.Stats().Duplicates)
	assert.Equal(t, int64(2), b.Stats().Topics)
}

// signalPeer drops what a session sends, without allocating, and signals
// each Send on sent (if not full).
type signalPeer struct{ sent chan struct{} }

func newSignalPeer() signalPeer { return signalPeer{sent: make(chan struct{}, 1)} }

func (p signalPeer) Send([]byte) error {
	select {
	case p.sent <- struct{}{}:
	default:
	}
	return nil
}
func (signalPeer) Close() error { return nil }

// TestAllocsSessionBatch: the broker's path for a BATCH (decode, copy into
// a pooled buffer, hand over to the appender, read the records and their
// metadata into its scratch, Append, RECEIPT) allocates nothing once warm,
// with and without metadata. Each frame waits for its receipt, so that
// every Append takes one frame, as at a steady rate.
func TestAllocsSessionBatch(t *testing.T) {
	key := make([]byte, 16)
	hs := []wire.Header{{Key: "trace-id", Value: []byte("0af7651916cd43dd")}, {Key: "source", Value: []byte("eu-1")}}
	for _, meta := range []bool{false, true} {
		t.Run(fmt.Sprint("meta=", meta), func(t *testing.T) {
			b, err := broker.New(broker.NewCountingStore())
			require.NoError(t, err)
			p := newSignalPeer()
			s := b.NewSession(p)
			defer s.Close()
			require.NoError(t, s.Handle(helloFrame(t, "p", wire.DefaultMaxFrameSize)))
			<-p.sent
			require.NoError(t, s.Handle(topicFrame(t, 0, dflt)))
			<-p.sent
			const runs, per = 50, 100
			frames := make([][]byte, runs+2)
			for i := range frames {
				var bb wire.BatchBuilder
				bb.Reset(nil, 0, uint64(i*per+1))
				for range per {
					if meta {
						bb.AddRecord(make([]byte, 100), key, hs, time.Unix(1700000000, 0))
					} else {
						bb.Add(make([]byte, 100))
					}
				}
				frames[i] = bb.Finish()
			}
			i := 0
			allocs := testing.AllocsPerRun(runs, func() {
				if err := s.Handle(frames[i]); err != nil {
					t.Fatal(err)
				}
				<-p.sent
				i++
			})
			// Each BATCH here finds its topic idle (the previous receipt
			// was awaited), so the topic's goroutine starts anew: the go
			// statement's one allocation. A producer that keeps frames in
			// flight finds it running and costs none.
			if testkit.RaceEnabled {
				t.Skipf("%v allocations per batch: counts do not hold under -race (sync.Pool drops one Put in four)", allocs)
			}
			assert.LessOrEqual(t, allocs, 1.0, "allocations per batch of %d records", per)
		})
	}
}

// BenchmarkSessionBatch: the broker's path for a BATCH of 100 records of
// 100 bytes (decode, copy, read records and metadata, Append to a
// CountingStore, RECEIPT), without and with a 16-byte key and two headers
// per record. Frames are handed over as fast as Handle takes them, and the
// appender stores what waits together, as under load; the time includes
// the last receipt.
func BenchmarkSessionBatch(b *testing.B) {
	key := make([]byte, 16)
	hs := []wire.Header{{Key: "trace-id", Value: []byte("0af7651916cd43dd")}, {Key: "source", Value: []byte("eu-1")}}
	for _, c := range []struct {
		meta bool
		per  int
	}{{false, 100}, {true, 100}, {false, 4096}, {true, 4096}} {
		meta, per := c.meta, c.per
		b.Run(fmt.Sprintf("meta=%v/records=%d", meta, per), func(b *testing.B) {
			br, err := broker.New(broker.NewCountingStore())
			require.NoError(b, err)
			s := br.NewSession(newSignalPeer())
			defer s.Close()
			require.NoError(b, s.Handle(helloFrame(b, "p", wire.DefaultMaxFrameSize)))
			var bb wire.BatchBuilder
			var buf []byte
			seq := uint64(1)
			b.ReportAllocs()
			for b.Loop() {
				bb.Reset(buf, 0, seq)
				for range per {
					if meta {
						bb.AddRecord(key, key, hs, time.Unix(1700000000, 0))
					} else {
						bb.Add(key)
					}
				}
				buf = bb.Finish()
				if err := s.Handle(buf); err != nil {
					b.Fatal(err)
				}
				seq += uint64(per)
			}
			s.Close() // waits for the last Append and its receipt
			b.ReportMetric(float64(b.N*per)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
