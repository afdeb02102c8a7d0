package broker_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/wire"
)

// fuzzMaxFrame is the broker's frame limit in FuzzSession, small enough
// that the fuzzer can reach it.
const fuzzMaxFrame = 4096

// FuzzSession feeds arbitrary frames to sessions. The input is split into
// frames with wire.Split (what is left after a split error or an
// incomplete frame is fed as one more frame), played on a session, replayed
// on a second session (a producer resending after a reconnect), and then fed
// whole as one frame to a third. It checks that Handle never panics, that
// every reply is a well-formed frame, that every error is one Handle
// documents, that receipts are cumulative and match the store, that the
// replay stores nothing new, and that every producer's seqs in the store are
// strictly increasing.
func FuzzSession(f *testing.F) {
	f.Add(seedStream(f))
	f.Add(seedMetaStream(f))
	f.Add(append(seedStream(f), seedMetaStream(f)...))
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 3})

	f.Fuzz(func(t *testing.T, data []byte) {
		store := broker.NewMemoryStore()
		b, err := broker.New(store, broker.MaxFrameSize(fuzzMaxFrame))
		if err != nil {
			t.Fatal(err)
		}
		frames := splitFrames(data)

		play(t, b, store, frames)
		checkStore(t, store)
		before := snapshot(store)

		play(t, b, store, frames)
		if after := snapshot(store); !equalSnapshots(before, after) {
			t.Fatalf("replaying the same frames stored more:\nbefore %v\nafter  %v", before, after)
		}

		play(t, b, store, [][]byte{data})
		if after := snapshot(store); !equalSnapshots(before, after) {
			t.Fatalf("a lone frame without HELLO stored something: %v", after)
		}

		st := b.Stats()
		if st.Sessions != 0 {
			t.Fatalf("%d sessions left open", st.Sessions)
		}
		total := 0
		for _, ts := range store.Streams() {
			total += store.TopicLen(ts[0], ts[1])
		}
		if st.Stored != uint64(total) {
			t.Fatalf("Stats().Stored %d, store holds %d records", st.Stored, total)
		}
	})
}

// splitFrames cuts data into frames as a transport's reader would.
func splitFrames(data []byte) [][]byte {
	var frames [][]byte
	for rest := data; len(rest) > 0; {
		frame, n, err := wire.Split(rest, fuzzMaxFrame)
		if err != nil || n == 0 {
			return append(frames, rest)
		}
		frames = append(frames, frame)
		rest = rest[n:]
	}
	return frames
}

// play feeds frames to a new session, checking each reply, and closes it.
// Like a transport that ignores errors, it keeps feeding after one, which
// only makes the session's life harder. A HELLO, a TOPIC and a BATCH
// accepted by Handle are answered by the session's goroutines: play waits
// for that answer before the next frame, as a producer waits for TOPIC_OK.
func play(t *testing.T, b *broker.Broker, store *broker.MemoryStore, frames [][]byte) {
	p := &fakePeer{}
	s := b.NewSession(p)
	defer s.Close()
	acked := map[uint32]uint64{}
	names := map[uint32]string{} // declared ids
	for i, frame := range frames {
		err := s.Handle(frame)
		typ, terr := wire.TypeOf(frame)
		var declared wire.Topic
		if terr == nil && typ == wire.TypeTopic {
			declared, _ = wire.DecodeTopic(frame)
		}
		if terr == nil && err == nil && (typ == wire.TypeBatch || typ == wire.TypeHello || typ == wire.TypeTopic) {
			if reply := p.next(); reply != nil {
				p.mu.Lock()
				p.frames = append([][]byte{reply}, p.frames...)
				p.mu.Unlock()
			}
		}
		if err != nil && !errors.Is(err, broker.ErrProtocol) && !errors.Is(err, broker.ErrStore) && !errors.Is(err, broker.ErrSessionClosed) {
			t.Fatalf("frame %d: unexpected error %v", i, err)
		}
		for _, reply := range p.take() {
			rtyp, rerr := wire.TypeOf(reply)
			if rerr != nil {
				t.Fatalf("frame %d: invalid reply %x: %v", i, reply, rerr)
			}
			switch rtyp {
			case wire.TypeError:
				if e, derr := wire.DecodeError(reply); derr != nil || e.Code == 0 {
					t.Fatalf("frame %d: bad ERROR %s", i, testkit.DescribeFrame(reply))
				}
			case wire.TypeHelloOK:
				ok, derr := wire.DecodeHelloOK(reply)
				if derr != nil {
					t.Fatalf("frame %d: bad HELLO_OK: %v", i, derr)
				}
				if ok.MaxFrameSize > fuzzMaxFrame {
					t.Fatalf("HELLO_OK max frame %d above the broker's %d", ok.MaxFrameSize, fuzzMaxFrame)
				}
			case wire.TypeTopicOK:
				ok, derr := wire.DecodeTopicOK(reply)
				if derr != nil || ok.ID != declared.ID {
					t.Fatalf("frame %d: bad TOPIC_OK %+v (%v) for %+v", i, ok, derr, declared)
				}
				st, _ := store.State(declared.Name, s.Producer())
				if ok.LastSeq != st.LastSeq {
					t.Fatalf("frame %d: TOPIC_OK says %d, store's last seq is %d", i, ok.LastSeq, st.LastSeq)
				}
				names[ok.ID], acked[ok.ID] = declared.Name, ok.LastSeq
			case wire.TypeTopicError:
				if _, derr := wire.DecodeTopicError(reply); derr != nil {
					t.Fatalf("frame %d: bad TOPIC_ERROR: %v", i, derr)
				}
			case wire.TypeReceipt:
				rs, derr := wire.DecodeReceipts(reply, nil)
				if derr != nil {
					t.Fatalf("frame %d: bad RECEIPT: %v", i, derr)
				}
				for _, r := range rs {
					name, ok := names[r.Topic]
					if !ok {
						t.Fatalf("frame %d: receipt for topic id %d, not open", i, r.Topic)
					}
					if r.Seq < acked[r.Topic] {
						t.Fatalf("frame %d: receipt %d after %d", i, r.Seq, acked[r.Topic])
					}
					acked[r.Topic] = r.Seq
					if st, _ := store.State(name, s.Producer()); r.Seq > st.LastSeq {
						t.Fatalf("frame %d: receipt %d, store's last seq is %d", i, r.Seq, st.LastSeq)
					}
					checkProducer(t, store, name, s.Producer())
				}
			}
		}
	}
}

func checkStore(t *testing.T, store *broker.MemoryStore) {
	for _, ts := range store.Streams() {
		checkProducer(t, store, ts[0], ts[1])
	}
}

// checkProducer fails unless name's seqs on topic are strictly increasing
// and its records' metadata within the limits.
func checkProducer(t *testing.T, store *broker.MemoryStore, topic, name string) {
	recs := store.TopicRecords(topic, name)
	for _, r := range recs {
		if _, err := wire.CheckMeta(r.Key, r.Headers, r.EventTime); err != nil {
			t.Fatalf("producer %q/%q: seq %d stored with bad metadata: %v", topic, name, r.Seq, err)
		}
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].Seq <= recs[i-1].Seq {
			t.Fatalf("producer %q: seq %d stored after %d", name, recs[i].Seq, recs[i-1].Seq)
		}
	}
}

func snapshot(store *broker.MemoryStore) map[[2]string][]broker.Record {
	m := map[[2]string][]broker.Record{}
	for _, ts := range store.Streams() {
		m[ts] = store.TopicRecords(ts[0], ts[1])
	}
	return m
}

func equalSnapshots(a, b map[[2]string][]broker.Record) bool {
	if len(a) != len(b) {
		return false
	}
	for name, ra := range a {
		if !slices.EqualFunc(ra, b[name], func(x, y broker.Record) bool {
			return x.Seq == y.Seq && string(x.Payload) == string(y.Payload)
		}) {
			return false
		}
	}
	return true
}

// seedStream is a valid session: HELLO, batches with an overlap, a full
// duplicate and a gap, a PING.
func seedStream(tb testing.TB) []byte {
	s := helloFrame(tb, "orders", wire.DefaultMaxFrameSize)
	s = append(s, topicFrame(tb, 0, wire.DefaultTopic)...)
	s = append(s, batchFrame(0, 1, 3)...)
	s = append(s, batchFrame(1, 2, 4)...)
	s = append(s, wire.AppendPing(nil, wire.Ping{Nonce: 7})...)
	s = append(s, batchFrame(2, 1, 2)...)
	s = append(s, batchFrame(3, 9, 2)...)
	return s
}

// seedMetaStream is a session on another topic whose records carry keys,
// headers and event times, with a duplicate.
func seedMetaStream(tb testing.TB) []byte {
	h, err := wire.AppendHello(nil, wire.Hello{Version: wire.Version, MaxFrameSize: wire.DefaultMaxFrameSize, Producer: "orders"})
	if err != nil {
		tb.Fatal(err)
	}
	h = append(h, topicFrame(tb, 5, "eu.orders")...)
	var bb wire.BatchBuilder
	hs := []wire.Header{{Key: "trace", Value: []byte("t1")}, {Key: "trace", Value: nil}}
	bb.Reset(nil, 5, 1)
	bb.AddRecord([]byte("a"), []byte("k1"), hs, time.Unix(1700000000, 5))
	bb.AddRecord(nil, nil, hs[:1], time.Time{})
	h = append(h, bb.Finish()...)
	bb.Reset(nil, 5, 2)
	bb.AddRecord([]byte("b"), []byte("k2"), nil, time.Unix(0, 1))
	bb.AddRecord([]byte("c"), nil, nil, time.Time{})
	return append(h, bb.Finish()...)
}
