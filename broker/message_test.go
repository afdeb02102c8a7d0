package broker_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/wire"
)

// metaRecords are records with every combination of metadata: key alone,
// headers alone (a repeated key, an empty value), event time alone, all of
// them, none, an empty payload; sequence IDs with a gap.
func metaRecords() []broker.Record {
	hs := []wire.Header{{Key: "trace", Value: []byte("00-4bf9")}, {Key: "trace", Value: []byte{}}, {Key: "tenant", Value: []byte("acme")}}
	return []broker.Record{
		{Seq: 1, Payload: []byte("key only"), Key: []byte("user-17")},
		{Seq: 2, Payload: []byte("headers only"), Headers: hs},
		{Seq: 3, Payload: []byte("time only"), EventTime: time.Unix(1700000000, 123456789)},
		{Seq: 7, Payload: []byte("all"), Key: []byte{0, 1, 2}, Headers: hs[2:], EventTime: time.Unix(-86400, 1)},
		{Seq: 8, Payload: []byte("none")},
		{Seq: 9, Payload: []byte{}, Key: []byte("k")},
	}
}

// requireSameRecords compares records field by field (times with Equal).
func requireSameRecords(t *testing.T, want, got []broker.Record) {
	t.Helper()
	require.Len(t, got, len(want))
	for i, w := range want {
		g := got[i]
		assert.Equal(t, w.Seq, g.Seq, "record %d seq", i)
		assert.True(t, bytes.Equal(w.Payload, g.Payload), "record %d payload %q, want %q", i, g.Payload, w.Payload)
		assert.True(t, bytes.Equal(w.Key, g.Key), "record %d key %q, want %q", i, g.Key, w.Key)
		assert.True(t, w.EventTime.Equal(g.EventTime), "record %d event time %v, want %v", i, g.EventTime, w.EventTime)
		require.Len(t, g.Headers, len(w.Headers), "record %d headers", i)
		for j := range w.Headers {
			assert.Equal(t, w.Headers[j].Key, g.Headers[j].Key, "record %d header %d", i, j)
			assert.True(t, bytes.Equal(w.Headers[j].Value, g.Headers[j].Value), "record %d header %d value", i, j)
		}
	}
}

// TestMessageFieldsRoundTrip stores records with every metadata field in a
// MemoryStore and a FileStore (read back before and after a reopen), after
// scribbling over the caller's buffers (stores must copy), and through a
// session on a topic.
func TestMessageFieldsRoundTrip(t *testing.T) {
	scribble := func(recs []broker.Record) {
		for _, r := range recs {
			clear(r.Payload)
			clear(r.Key)
			for _, h := range r.Headers {
				clear(h.Value)
			}
		}
	}
	t.Run("MemoryStore", func(t *testing.T) {
		m := broker.NewMemoryStore()
		in := metaRecords()
		require.NoError(t, m.Append("eu.orders", "p", in))
		scribble(in)
		requireSameRecords(t, metaRecords(), m.TopicRecords("eu.orders", "p"))
		assert.Empty(t, m.Records("p"), "another topic")
	})
	t.Run("FileStore", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "store")
		s := openFileStore(t, path)
		in := metaRecords()
		require.NoError(t, s.Append("eu.orders", "p", in))
		scribble(in)
		scan := func(s *broker.FileStore) []broker.Record {
			var got []broker.Record
			require.NoError(t, s.Scan(func(topic, producer string, r broker.Record) error {
				require.Equal(t, "eu.orders", topic)
				require.Equal(t, "p", producer)
				c := broker.NewMemoryStore() // copies the views, headers included
				require.NoError(t, c.Append(topic, producer, []broker.Record{r}))
				got = append(got, c.TopicRecords(topic, producer)...)
				return nil
			}))
			return got
		}
		requireSameRecords(t, metaRecords(), scan(s))
		require.NoError(t, s.Close())
		s = openFileStore(t, path)
		defer s.Close()
		requireSameRecords(t, metaRecords(), scan(s))
		last, err := s.LastSeq("eu.orders", "p")
		require.NoError(t, err)
		assert.Equal(t, uint64(9), last)
	})
	t.Run("session", func(t *testing.T) {
		b, store := newBroker(t)
		c := newConn(t, b)
		defer c.Close()
		h, err := wire.AppendHello(nil, wire.Hello{Version: wire.Version, MaxFrameSize: wire.DefaultMaxFrameSize, Producer: "p", Topic: "eu.orders"})
		require.NoError(t, err)
		reply, err := c.handle(t, h)
		require.NoError(t, err)
		helloOK(t, reply)
		want := metaRecords()[:3] // consecutive seqs, as a producer sends them
		var bb wire.BatchBuilder
		bb.Reset(nil, 1)
		for _, r := range want {
			bb.AddRecord(r.Payload, r.Key, r.Headers, r.EventTime)
		}
		reply, err = c.handle(t, bb.Finish())
		require.NoError(t, err)
		assert.Equal(t, uint64(3), receipt(t, reply))
		requireSameRecords(t, want, store.TopicRecords("eu.orders", "p"))
	})
}

// TestTopicsDeduplicateSeparately: one producer name on two topics has two
// sequences; a batch on one topic is never a duplicate of the other's.
func TestTopicsDeduplicateSeparately(t *testing.T) {
	b, store := newBroker(t)
	hello := func(c conn, topic string) uint64 {
		h, err := wire.AppendHello(nil, wire.Hello{Version: wire.Version, MaxFrameSize: wire.DefaultMaxFrameSize, Producer: "p", Topic: topic})
		require.NoError(t, err)
		reply, err := c.handle(t, h)
		require.NoError(t, err)
		return helloOK(t, reply).LastSeq
	}
	a, c := newConn(t, b), newConn(t, b)
	defer a.Close()
	defer c.Close()
	assert.Equal(t, uint64(0), hello(a, "a"))
	assert.Equal(t, uint64(0), hello(c, "c"), "both sessions live: no takeover across topics")
	assert.Equal(t, uint64(5), a.send(t, 0, 1, 5))
	assert.Equal(t, uint64(3), c.send(t, 1, 1, 3), "seqs 1-3 on topic c are new although 1-5 are stored on a")
	assert.Equal(t, uint64(5), a.send(t, 0, 4, 2), "a resend on a is a duplicate")
	assert.False(t, a.peer.closed() || c.peer.closed())
	assert.Equal(t, 5, store.TopicLen("a", "p"))
	assert.Equal(t, 3, store.TopicLen("c", "p"))
	assert.Equal(t, uint64(2), b.Stats().Duplicates)

	// A reconnect learns its own topic's last seq.
	a.Close()
	a2 := newConn(t, b)
	defer a2.Close()
	assert.Equal(t, uint64(5), hello(a2, "a"))

	// A FileStore keeps the topics apart across a reopen.
	path := filepath.Join(t.TempDir(), "store")
	s := openFileStore(t, path)
	require.NoError(t, s.Append("a", "p", seqRecs(1, [][]byte{[]byte("x"), []byte("y")})))
	require.NoError(t, s.Append("c", "p", seqRecs(1, [][]byte{[]byte("z")})))
	require.Error(t, s.Append("a", "p", seqRecs(2, [][]byte{[]byte("dup")})))
	require.NoError(t, s.Close())
	s = openFileStore(t, path)
	defer s.Close()
	for topic, want := range map[string]uint64{"a": 2, "c": 1, dflt: 0} {
		last, err := s.LastSeq(topic, "p")
		require.NoError(t, err)
		assert.Equal(t, want, last, "topic %s", topic)
	}
}

// TestFileStoreOpensVersion1 opens a file a version 1 FileStore wrote: its
// records read as topic "default" without metadata, their producers keep
// deduplicating, the header is upgraded (an older inflight then refuses the
// file rather than cut what it cannot read), and new entries append after.
func TestFileStoreOpensVersion1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	require.NoError(t, os.WriteFile(path, append([]byte("IFLT\x00\x00\x00\x01"), v1Entries()...), 0o600))
	s := openFileStore(t, path)
	assert.Equal(t, broker.Recovery{Entries: 2, Records: 3, UpgradedFrom: 1}, s.Recovery())
	for name, want := range map[string]uint64{"old": 2, "p": 9} {
		last, err := s.LastSeq(dflt, name)
		require.NoError(t, err)
		assert.Equal(t, want, last, name)
	}
	require.Error(t, s.Append(dflt, "p", seqRecs(9, [][]byte{[]byte("dup")})), "dedup state survives")
	require.NoError(t, s.Append(dflt, "p", []broker.Record{{Seq: 10, Payload: []byte("new"), Key: []byte("k")}}))
	require.NoError(t, s.Close())

	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, []byte("IFLT\x00\x00\x00\x02"), got[:8])

	s = openFileStore(t, path)
	defer s.Close()
	assert.Equal(t, broker.Recovery{Entries: 3, Records: 4}, s.Recovery())
	var seen []string
	require.NoError(t, s.Scan(func(topic, producer string, r broker.Record) error {
		seen = append(seen, fmt.Sprintf("%s/%s/%d/%s/%s/%d", topic, producer, r.Seq, r.Payload, r.Key, len(r.Headers)))
		return nil
	}))
	assert.Equal(t, []string{"default/old/1/a//0", "default/old/2///0", "default/p/9/z//0", "default/p/10/new/k/0"}, seen)
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
			const runs, per = 50, 100
			frames := make([][]byte, runs+2)
			for i := range frames {
				var bb wire.BatchBuilder
				bb.Reset(nil, uint64(i*per+1))
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
			assert.Zero(t, allocs, "allocations per batch of %d records", per)
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
				bb.Reset(buf, seq)
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
