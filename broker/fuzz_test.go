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
// only makes the session's life harder.
func play(t *testing.T, b *broker.Broker, store *broker.MemoryStore, frames [][]byte) {
	p := &fakePeer{}
	s := b.NewSession(p)
	defer s.Close()
	var acked uint64
	asyncFailed := false // the appender sent an ERROR: later frames fail without a reply
	for i, frame := range frames {
		err := s.Handle(frame)
		if typ, terr := wire.TypeOf(frame); terr == nil && typ == wire.TypeBatch && err == nil {
			// A BATCH is answered by the session's appender: wait for it.
			if reply := p.next(); reply != nil {
				p.mu.Lock()
				p.frames = append([][]byte{reply}, p.frames...)
				p.mu.Unlock()
			}
		}
		sent := p.take()
		if len(sent) > 1 {
			t.Fatalf("frame %d: %d replies", i, len(sent))
		}
		var reply []byte
		var typ wire.Type
		if len(sent) == 1 {
			reply = sent[0]
			var terr error
			if typ, terr = wire.TypeOf(reply); terr != nil {
				t.Fatalf("frame %d: invalid reply %x: %v", i, reply, terr)
			}
		}
		switch {
		case err == nil && typ == wire.TypeError:
			// A store failure found by the appender after Handle returned.
			if e, derr := wire.DecodeError(reply); derr != nil || e.Code == 0 {
				t.Fatalf("frame %d: bad ERROR %s", i, testkit.DescribeFrame(reply))
			}
			asyncFailed = true
		case err == nil:
			if reply == nil {
				t.Fatalf("frame %d: no error, no reply", i)
			}
		case asyncFailed && reply == nil:
			// The failure the appender reported before.
		case errors.Is(err, broker.ErrProtocol), errors.Is(err, broker.ErrStore):
			e, derr := wire.DecodeError(reply)
			if derr != nil {
				t.Fatalf("frame %d: error %v, reply %s", i, err, testkit.DescribeFrame(reply))
			}
			if e.Code == 0 {
				t.Fatalf("frame %d: ERROR with code 0", i)
			}
		default:
			t.Fatalf("frame %d: unexpected error %v", i, err)
		}
		switch typ {
		case wire.TypeHelloOK:
			ok, derr := wire.DecodeHelloOK(reply)
			if derr != nil {
				t.Fatalf("frame %d: bad HELLO_OK: %v", i, derr)
			}
			acked = ok.LastSeq
			if ok.MaxFrameSize > fuzzMaxFrame {
				t.Fatalf("HELLO_OK max frame %d above the broker's %d", ok.MaxFrameSize, fuzzMaxFrame)
			}
			fallthrough
		case wire.TypeReceipt:
			last, _ := lastSeq(store, s.Topic(), s.Producer())
			if typ == wire.TypeReceipt {
				r, derr := wire.DecodeReceipt(reply)
				if derr != nil {
					t.Fatalf("frame %d: bad RECEIPT: %v", i, derr)
				}
				if r.Seq < acked {
					t.Fatalf("frame %d: receipt %d after %d", i, r.Seq, acked)
				}
				acked = r.Seq
			}
			if acked != last {
				t.Fatalf("frame %d: %v says %d, store's last seq is %d", i, typ, acked, last)
			}
			checkProducer(t, store, s.Topic(), s.Producer())
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
	h, err := wire.AppendHello(nil, wire.Hello{Version: wire.Version, MaxFrameSize: wire.DefaultMaxFrameSize, Producer: "orders", Topic: "eu.orders"})
	if err != nil {
		tb.Fatal(err)
	}
	var bb wire.BatchBuilder
	hs := []wire.Header{{Key: "trace", Value: []byte("t1")}, {Key: "trace", Value: nil}}
	bb.Reset(nil, 1)
	bb.AddRecord([]byte("a"), []byte("k1"), hs, time.Unix(1700000000, 5))
	bb.AddRecord(nil, nil, hs[:1], time.Time{})
	h = append(h, bb.Finish()...)
	bb.Reset(nil, 2)
	bb.AddRecord([]byte("b"), []byte("k2"), nil, time.Unix(0, 1))
	bb.AddRecord([]byte("c"), nil, nil, time.Time{})
	return append(h, bb.Finish()...)
}
