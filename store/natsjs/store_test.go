package natsjs_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/store/natsjs"
	"github.com/inflightmq/inflight/store/natsjs/natsjstest"
	"github.com/inflightmq/inflight/wire"
)

var _ broker.Store = (*natsjs.Store)(nil)

// metaRecords are records with every kind of metadata, gaps between
// sequence IDs included.
func metaRecords() []broker.Record {
	t0 := time.Date(2026, 12, 3, 9, 30, 0, 123456789, time.UTC)
	return []broker.Record{
		{Seq: 1, Payload: []byte("plain")},
		{Seq: 2, Payload: []byte("keyed"), Key: []byte("k\x00\xff.*>")},
		{Seq: 3, Payload: nil, Key: []byte{}},
		{Seq: 7, Payload: []byte("timed"), EventTime: t0},
		{Seq: 8, Payload: []byte("headers"), Headers: []wire.Header{{Key: "a", Value: []byte("1")}, {Key: "a", Value: []byte("2")}, {Key: "b\r\n:", Value: []byte("\r\nvalue")}}},
		{Seq: 9, Payload: bytes.Repeat([]byte{0xfe}, 3000), Key: []byte("all"), EventTime: time.Unix(-5, 1), Headers: []wire.Header{{Key: "", Value: nil}}},
		{Seq: 1 << 40, Payload: []byte("far")},
	}
}

// TestRoundTrip: records written in both layouts come back with every
// field, in order, and LastSeq follows the writes.
func TestRoundTrip(t *testing.T) {
	c := startCluster(t, 1, natsjstest.Options{})
	ensureStream(t, c, natsjs.StreamConfig{})
	for _, l := range []natsjs.Layout{natsjs.LayoutPacked, natsjs.LayoutNative} {
		t.Run(l.String(), func(t *testing.T) {
			s := newStore(t, c, natsjs.Config{Layout: l})
			topic, producer := "rt-"+l.String(), "p"
			if last, err := lastSeq(s.State(topic, producer)); err != nil || last != 0 {
				t.Fatalf("LastSeq of a new subject = %d, %v; want 0, nil", last, err)
			}
			want := metaRecords()
			if err := s.Append(topic, producer, 0, want[:3]); err != nil {
				t.Fatal(err)
			}
			if err := s.Append(topic, producer, 0, want[3:]); err != nil {
				t.Fatal(err)
			}
			if last, err := lastSeq(s.State(topic, producer)); err != nil || last != 1<<40 {
				t.Fatalf("LastSeq = %d, %v; want %d", last, err, uint64(1<<40))
			}
			got := records(readSubject(t, c, s.Subject(topic, producer)))
			if len(got) != len(want) {
				t.Fatalf("%d records, want %d", len(got), len(want))
			}
			for i := range want {
				if err := sameRecord(got[i], want[i]); err != nil {
					t.Error(err)
				}
			}
			// A fresh store (another gateway) learns the tail from the stream.
			if last, err := lastSeq(newStore(t, c, natsjs.Config{Layout: l}).State(topic, producer)); err != nil || last != 1<<40 {
				t.Fatalf("LastSeq from a fresh store = %d, %v", last, err)
			}
		})
	}
}

// TestChunkingOverMaxPayload: a packed Append larger than max_payload is
// split into messages chained by compare-and-set, each within the limit; a
// record that fits in no message is refused with ErrRecordTooLarge.
func TestChunkingOverMaxPayload(t *testing.T) {
	const maxPayload = 64 << 10
	c := startCluster(t, 1, natsjstest.Options{MaxPayload: maxPayload})
	ensureStream(t, c, natsjs.StreamConfig{})
	s := newStore(t, c, natsjs.Config{})
	recs := make([]broker.Record, 200)
	for i := range recs {
		recs[i] = broker.Record{Seq: uint64(i + 1), Payload: bytes.Repeat([]byte{byte(i)}, 1500), Key: []byte("k")}
	}
	if err := s.Append("chunks", "p", 0, recs); err != nil {
		t.Fatal(err)
	}
	msgs := readSubject(t, c, s.Subject("chunks", "p"))
	if len(msgs) < 5 {
		t.Errorf("%d messages for 300 KB of records under a 64 KiB max_payload", len(msgs))
	}
	for _, m := range msgs {
		size := 0
		for _, r := range m.recs {
			size += len(r.Payload)
		}
		if size > maxPayload {
			t.Errorf("message %d holds %d payload bytes", m.seq, size)
		}
	}
	got := records(msgs)
	checkSeqs(t, got, seqs(1, 200))
	for i := range got {
		if err := sameRecord(got[i], recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.Messages != uint64(len(msgs)) || st.Conflicts != 0 {
		t.Errorf("stats %+v, want %d messages and no conflict", st, len(msgs))
	}

	big := []broker.Record{{Seq: 201, Payload: make([]byte, maxPayload)}}
	for _, l := range []natsjs.Layout{natsjs.LayoutPacked, natsjs.LayoutNative} {
		err := newStore(t, c, natsjs.Config{Layout: l}).Append("chunks", "p", 0, big)
		if !errors.Is(err, natsjs.ErrRecordTooLarge) {
			t.Errorf("%v: Append of a record over max_payload: %v, want ErrRecordTooLarge", l, err)
		}
	}
	if last, _ := lastSeq(s.State("chunks", "p")); last != 200 {
		t.Errorf("LastSeq %d after the refused record, want 200", last)
	}
}

// TestNativeSubjectsFollowTopicTokens: a topic's own tokens and the
// producer name make the subject, so a plain NATS filter on a topic prefix
// selects what a user means; names that cannot be subject tokens are
// refused (by State, what a producer meets when it starts, and by Fence
// and Append) with ErrInvalidName, and nothing is written for them.
func TestNativeSubjectsFollowTopicTokens(t *testing.T) {
	c := startCluster(t, 1, natsjstest.Options{})
	ensureStream(t, c, natsjs.StreamConfig{})
	s := newStore(t, c, natsjs.Config{Prefix: "inflight"})
	writes := []struct{ topic, producer string }{
		{"orders.eu", "svc-1"}, {"orders.eu", "svc-2"}, {"orders.us", "svc-1"}, {"orders", "svc-1"}, {"audit", "Ünïcødé"},
	}
	for i, w := range writes {
		if err := s.Append(w.topic, w.producer, 0, plainRecords(uint64(i+1))); err != nil {
			t.Fatalf("Append(%q, %q): %v", w.topic, w.producer, err)
		}
	}
	if got, want := s.Subject("orders.eu", "svc-1"), "inflight.orders.eu.svc-1"; got != want {
		t.Errorf("Subject = %q, want %q", got, want)
	}
	nc := connect(t, c)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for filter, want := range map[string][]string{
		"inflight.orders.>":     {"inflight.orders.eu.svc-1", "inflight.orders.eu.svc-2", "inflight.orders.us.svc-1", "inflight.orders.svc-1"},
		"inflight.orders.eu.*":  {"inflight.orders.eu.svc-1", "inflight.orders.eu.svc-2"},
		"inflight.*.*.svc-1":    {"inflight.orders.eu.svc-1", "inflight.orders.us.svc-1"},
		"inflight.audit.*":      {"inflight.audit.Ünïcødé"},
		"inflight.orders.eu.>":  {"inflight.orders.eu.svc-1", "inflight.orders.eu.svc-2"},
		"inflight.orders.svc-1": {"inflight.orders.svc-1"},
	} {
		var got []string
		for _, m := range plainConsume(t, ctx, js, filter, len(want)) {
			got = append(got, m.Subject())
		}
		if !slices.Equal(got, want) {
			t.Errorf("consumer on %s got %q, want %q", filter, got, want)
		}
	}
	// ParseSubject reads back topic and producer, for `inflight read`.
	if tp, p, ok := natsjs.ParseSubject("inflight", "inflight.orders.eu.svc-1"); !ok || tp != "orders.eu" || p != "svc-1" {
		t.Errorf("ParseSubject = %q, %q, %v", tp, p, ok)
	}
	if tp, p, ok := natsjs.ParseSubject("inflight", "inflight.=b3JkZXJzLmV1.svc-1"); !ok || tp != "orders.eu" || p != "svc-1" {
		t.Errorf("ParseSubject of a subject written before the native layout = %q, %q, %v", tp, p, ok)
	}

	bad := []struct{ topic, producer string }{
		{"a..b", "p"}, {".a", "p"}, {"a.", "p"}, {"a b", "p"}, {"a.*", "p"}, {">", "p"}, {"=x", "p"}, {"a\r\n", "p"},
		{"t", "a.b"}, {"t", "a b"}, {"t", "*"}, {"t", ">"}, {"t", ""}, {"t", "=p"},
	}
	for _, b := range bad {
		if _, err := s.State(b.topic, b.producer); !errors.Is(err, natsjs.ErrInvalidName) {
			t.Errorf("State(%q, %q): %v, want ErrInvalidName", b.topic, b.producer, err)
		}
		if err := s.Append(b.topic, b.producer, 0, plainRecords(1)); !errors.Is(err, natsjs.ErrInvalidName) {
			t.Errorf("Append(%q, %q): %v, want ErrInvalidName", b.topic, b.producer, err)
		}
	}
	if err := s.Fence("a.b", 1); !errors.Is(err, natsjs.ErrInvalidName) {
		t.Errorf("Fence of a dotted name: %v, want ErrInvalidName", err)
	}
	if err := s.Append("", "p", 0, plainRecords(1)); !errors.Is(err, natsjs.ErrEmptyTopic) {
		t.Errorf("Append with an empty topic: %v, want ErrEmptyTopic", err)
	}
	if _, err := s.State("", "p"); !errors.Is(err, natsjs.ErrEmptyTopic) {
		t.Errorf("State with an empty topic: %v, want ErrEmptyTopic", err)
	}
	st, err := js.Stream(ctx, streamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter("inflight.>"))
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs == 0 || len(info.State.Subjects) != len(writes) {
		t.Errorf("subjects under inflight.>: %v, want the %d written", info.State.Subjects, len(writes))
	}
}

// TestStaleDirectRead: with ReadDirect a lagging replica may answer with an
// older tail. The store believes it, so its LastSeq is low and its first
// write carries a stale compare-and-set; that write fails, the store
// re-reads from the leader, drops what is stored and writes the rest once.
func TestStaleDirectRead(t *testing.T) {
	c := startCluster(t, 1, natsjstest.Options{})
	ensureStream(t, c, natsjs.StreamConfig{AllowDirect: true})
	a := newStore(t, c, natsjs.Config{})
	for _, first := range []uint64{1, 11, 21} {
		if err := a.Append("t", "p", 0, plainRecords(seqs(first, 10)...)); err != nil {
			t.Fatal(err)
		}
	}
	b := newStore(t, c, natsjs.Config{Read: natsjs.ReadDirect})
	var staleReads int
	natsjs.SetDirectHook(b, func(_ string, streamSeq, last uint64) (uint64, uint64) {
		if streamSeq == 30 && last == 30 {
			staleReads++
			return 20, 20 // the tail as a replica one batch behind sees it
		}
		return streamSeq, last
	})
	last, err := lastSeq(b.State("t", "p"))
	if err != nil || last != 20 {
		t.Fatalf("stale LastSeq = %d, %v; want the stale 20", last, err)
	}
	// What a broker does with that answer: the producer resends 21...
	if err := b.Append("t", "p", 0, plainRecords(seqs(21, 20)...)); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.Conflicts != 1 || st.Trimmed != 10 || st.Records != 10 {
		t.Errorf("stats %+v, want 1 conflict, 10 trimmed, 10 written", st)
	}
	if staleReads != 1 {
		t.Errorf("%d stale reads, want 1: the re-read after the conflict must go to the leader", staleReads)
	}
	checkSeqs(t, records(readSubject(t, c, a.Subject("t", "p"))), seqs(1, 40))
}

// TestCASConflict: a store whose idea of the tail is stale (another store
// wrote since) loses its compare-and-set, re-reads, and writes only what is
// missing; two stores racing to write the same records, cut differently,
// store each record once, in order, in both layouts.
func TestCASConflict(t *testing.T) {
	c := startCluster(t, 3, natsjstest.Options{})
	ensureStream(t, c, natsjs.StreamConfig{Replicas: 3})
	t.Run("stale-tail", func(t *testing.T) {
		a, b := newStore(t, c, natsjs.Config{}), newStore(t, c, natsjs.Config{})
		if last, err := lastSeq(b.State("t", "stale")); err != nil || last != 0 {
			t.Fatal(last, err)
		}
		// The first batch of a new three-server stream may wait for its
		// leader longer than a publish's timeout (a failure after 5.4 s in
		// one run of -count=3): a's records, the setup, go in with retries,
		// stored once whatever a try did (the final check); b's Append is
		// the one under test.
		waitFor(t, 30*time.Second, "a's append", func() bool {
			return a.Append("t", "stale", 0, plainRecords(seqs(1, 10)...)) == nil
		})
		if err := b.Append("t", "stale", 0, plainRecords(seqs(5, 10)...)); err != nil {
			t.Fatal(err)
		}
		if st := b.Stats(); st.Conflicts != 1 || st.Trimmed != 6 || st.Records != 4 {
			t.Errorf("stats %+v, want 1 conflict, 6 trimmed, 4 written", st)
		}
		checkSeqs(t, records(readSubject(t, c, a.Subject("t", "stale"))), seqs(1, 14))
	})
	for _, l := range []natsjs.Layout{natsjs.LayoutPacked, natsjs.LayoutNative} {
		t.Run("race-"+l.String(), func(t *testing.T) {
			const n = 3000
			all := plainRecords(seqs(1, n)...)
			var wg sync.WaitGroup
			stores := make([]*natsjs.Store, 2)
			for w := range stores {
				stores[w] = newStore(t, c, natsjs.Config{Layout: l, MaxConflicts: 1000})
				wg.Go(func() {
					// Writer w cuts the records in batches of 37 or 53.
					for pos, size := 0, 37+16*w; pos < n; pos += size {
						if err := stores[w].Append("t", "race-"+l.String(), 0, all[pos:min(pos+size, n)]); err != nil {
							t.Errorf("writer %d: %v", w, err)
							return
						}
					}
				})
			}
			wg.Wait()
			a, b := stores[0].Stats(), stores[1].Stats()
			t.Logf("A %+v, B %+v", a, b)
			if a.Records+b.Records != n || a.Records+a.Trimmed != n || b.Records+b.Trimmed != n {
				t.Errorf("records written %d + %d, trimmed %d + %d, want %d in all", a.Records, b.Records, a.Trimmed, b.Trimmed, n)
			}
			checkSeqs(t, records(readSubject(t, c, stores[0].Subject("t", "race-"+l.String()))), seqs(1, n))
		})
	}
}

// TestNewRefuses: configurations and streams the store cannot use are
// refused with a clear error.
func TestNewRefuses(t *testing.T) {
	c := startCluster(t, 1, natsjstest.Options{})
	ensureStream(t, c, natsjs.StreamConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc := connect(t, c)
	// A stream made before the native layout: no fence subjects, no
	// atomic publish, no rollups.
	legacy, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := legacy.CreateStream(ctx, jetstream.StreamConfig{Name: "LEGACY", Subjects: []string{"legacy.>"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg  natsjs.Config
		want error
	}{
		{natsjs.Config{}, natsjs.ErrInvalidConfig},
		{natsjs.Config{Stream: "a.b"}, natsjs.ErrInvalidConfig},
		{natsjs.Config{Stream: streamName, Prefix: "a..b"}, natsjs.ErrInvalidConfig},
		{natsjs.Config{Stream: streamName, Prefix: "a.*"}, natsjs.ErrInvalidConfig},
		{natsjs.Config{Stream: streamName, Timeout: -1}, natsjs.ErrInvalidConfig},
		{natsjs.Config{Stream: streamName, Layout: 7}, natsjs.ErrInvalidConfig},
		{natsjs.Config{Stream: streamName, Prefix: "other"}, natsjs.ErrStreamMismatch},
		{natsjs.Config{Stream: "LEGACY", Prefix: "legacy"}, natsjs.ErrStreamMismatch},
		{natsjs.Config{Stream: streamName, Read: natsjs.ReadDirect}, natsjs.ErrStreamMismatch},
	} {
		if _, err := natsjs.New(ctx, nc, tc.cfg); !errors.Is(err, tc.want) {
			t.Errorf("New(%+v): %v, want %v", tc.cfg, err, tc.want)
		}
	}
	buffering, err := nats.Connect(c.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer buffering.Close()
	if _, err := natsjs.New(ctx, buffering, natsjs.Config{Stream: streamName}); !errors.Is(err, natsjs.ErrBufferingConn) {
		t.Errorf("New with a buffering connection: %v, want ErrBufferingConn", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range []natsjs.StreamConfig{
		{Name: streamName, Replicas: 3},
		{Name: streamName, Storage: jetstream.MemoryStorage},
		{Name: streamName, Prefix: "elsewhere"},
		{Name: "LEGACY", Prefix: "legacy"},
	} {
		if _, err := natsjs.EnsureStream(ctx, js, sc); !errors.Is(err, natsjs.ErrStreamMismatch) {
			t.Errorf("EnsureStream(%+v) on the existing stream: %v, want ErrStreamMismatch", sc, err)
		}
	}
	if _, err := natsjs.EnsureStream(ctx, js, natsjs.StreamConfig{Name: streamName}); err != nil {
		t.Errorf("EnsureStream on a fitting stream: %v", err)
	}
	s := newStore(t, c, natsjs.Config{})
	if err := s.Append("t", "p", 0, plainRecords(2, 1)); !errors.Is(err, natsjs.ErrBadRecords) {
		t.Errorf("Append out of order: %v, want ErrBadRecords", err)
	}
}
