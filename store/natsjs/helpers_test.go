package natsjs_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/store/natsjs"
	"github.com/inflightmq/inflight/store/natsjs/natsjstest"
	"github.com/inflightmq/inflight/wire"
)

const streamName = "INFLIGHT"

// startCluster starts n servers for the test and stops them at its end.
func startCluster(t testing.TB, n int, o natsjstest.Options) *natsjstest.Cluster {
	t.Helper()
	c, err := natsjstest.Start(t.TempDir(), n, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Shutdown)
	return c
}

// servers is a natsjstest.Cluster or natsjstest.Procs.
type servers interface{ URLs() string }

// connect dials the servers the way a store must be dialed; closed at the
// test's end.
func connect(t testing.TB, c servers) *nats.Conn {
	t.Helper()
	nc, err := natsjs.Connect(c.URLs())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// ensureStream creates the test stream; sc.Name defaults to streamName.
func ensureStream(t testing.TB, c *natsjstest.Cluster, sc natsjs.StreamConfig) {
	t.Helper()
	if sc.Name == "" {
		sc.Name = streamName
	}
	nc := connect(t, c)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := natsjs.EnsureStream(ctx, js, sc); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for c.StreamLeader(sc.Name) < 0 {
		if time.Now().After(deadline) {
			t.Fatal("no stream leader in 20s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// newStore makes a store on its own connection; cfg.Stream defaults to
// streamName.
func newStore(t testing.TB, c servers, cfg natsjs.Config) *natsjs.Store {
	t.Helper()
	if cfg.Stream == "" {
		cfg.Stream = streamName
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := natsjs.New(ctx, connect(t, c), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// storedMsg is one stream message of a subject, decoded.
type storedMsg struct {
	seq  uint64
	recs []broker.Record
}

// readSubject reads every message of subject in stream order and decodes
// it (records deep-copied).
func readSubject(t testing.TB, c servers, subject string) []storedMsg {
	t.Helper()
	var out []storedMsg
	eachRecord(t, c, subject, func(msgSeq uint64, r broker.Record) {
		if len(out) == 0 || out[len(out)-1].seq != msgSeq {
			out = append(out, storedMsg{seq: msgSeq})
		}
		m := &out[len(out)-1]
		m.recs = append(m.recs, cloneRecord(r))
	})
	return out
}

// eachRecord calls fn for every record on subject in stream order, with the
// stream sequence of its message; r's slices are valid only during the call.
func eachRecord(t testing.TB, c servers, subject string, fn func(msgSeq uint64, r broker.Record)) {
	t.Helper()
	js, err := jetstream.New(connect(t, c))
	if err != nil {
		t.Fatal(err)
	}
	// A watchdog, not a wait: 300 000 native messages read under -race on
	// a loaded two-core machine took over two minutes once.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	// Right after a failover the stream may not answer for a moment (a
	// request sent while it elects a leader gets no reply and would wait
	// for its whole context): each attempt gets 15 s, retried while
	// nothing was read.
	for {
		seen := false
		actx, acancel := context.WithTimeout(ctx, 15*time.Second)
		err = natsjs.Read(actx, js, streamName, subject, func(_ string, msgSeq uint64, r broker.Record) error {
			seen = true
			fn(msgSeq, r)
			return nil
		})
		acancel()
		if err == nil {
			return
		}
		if seen || ctx.Err() != nil {
			t.Fatalf("read %s: %v", subject, err)
		}
		t.Logf("read %s: %v (retrying)", subject, err)
		time.Sleep(100 * time.Millisecond)
	}
}

// records flattens messages into their records.
func records(msgs []storedMsg) []broker.Record {
	var out []broker.Record
	for _, m := range msgs {
		out = append(out, m.recs...)
	}
	return out
}

func cloneRecord(r broker.Record) broker.Record {
	r.Payload = bytes.Clone(r.Payload)
	if r.Key != nil {
		r.Key = bytes.Clone(r.Key)
	}
	if r.Headers != nil {
		hs := make([]wire.Header, len(r.Headers))
		for i, h := range r.Headers {
			hs[i] = wire.Header{Key: h.Key, Value: bytes.Clone(h.Value)}
		}
		r.Headers = hs
	}
	return r
}

// sameRecord compares everything a store must keep (an empty and a nil
// header value or payload are the same; a nil and an empty key are not).
func sameRecord(a, b broker.Record) error {
	switch {
	case a.Seq != b.Seq:
		return fmt.Errorf("seq %d != %d", a.Seq, b.Seq)
	case !bytes.Equal(a.Payload, b.Payload):
		return fmt.Errorf("seq %d: payload %q != %q", a.Seq, a.Payload, b.Payload)
	case (a.Key == nil) != (b.Key == nil) || !bytes.Equal(a.Key, b.Key):
		return fmt.Errorf("seq %d: key %q (nil %v) != %q (nil %v)", a.Seq, a.Key, a.Key == nil, b.Key, b.Key == nil)
	case !a.EventTime.Equal(b.EventTime):
		return fmt.Errorf("seq %d: event time %v != %v", a.Seq, a.EventTime, b.EventTime)
	case (a.Headers == nil) != (b.Headers == nil) || !slices.EqualFunc(a.Headers, b.Headers, func(x, y wire.Header) bool {
		return x.Key == y.Key && bytes.Equal(x.Value, y.Value)
	}):
		return fmt.Errorf("seq %d: headers %q != %q", a.Seq, a.Headers, b.Headers)
	}
	return nil
}

// checkSeqs fails t unless got holds exactly the sequence IDs want, in order.
func checkSeqs(t testing.TB, got []broker.Record, want []uint64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d records stored, want %d", len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		if got[i].Seq != want[i] {
			t.Fatalf("record %d: seq %d, want %d", i, got[i].Seq, want[i])
		}
	}
}

// waitFor polls f every 5 ms until it holds, failing t after d.
func waitFor(t testing.TB, d time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// seqs returns first, first+1, ..., first+n-1.
func seqs(first uint64, n int) []uint64 {
	s := make([]uint64, n)
	for i := range s {
		s[i] = first + uint64(i)
	}
	return s
}

// plainRecords makes records with the given sequence IDs and payload
// "p<seq>".
func plainRecords(ids ...uint64) []broker.Record {
	rs := make([]broker.Record, len(ids))
	for i, id := range ids {
		rs[i] = broker.Record{Seq: id, Payload: fmt.Appendf(nil, "p%d", id)}
	}
	return rs
}

// lastSeq returns the LastSeq of a State answer, and its error.
func lastSeq(st broker.NameState, err error) (uint64, error) { return st.LastSeq, err }
