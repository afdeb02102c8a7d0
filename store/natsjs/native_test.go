package natsjs_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/store/natsjs"
	"github.com/inflightmq/inflight/store/natsjs/layout"
	"github.com/inflightmq/inflight/store/natsjs/natsjstest"
	"github.com/inflightmq/inflight/wire"
)

// plainConsume reads every message on filter with a plain nats.go ordered
// consumer, as a NATS user would, until the server says none is pending;
// it expects at least want of them (the stream holds them already).
func plainConsume(t testing.TB, ctx context.Context, js jetstream.JetStream, filter string, want int) []jetstream.Msg {
	t.Helper()
	st, err := js.Stream(ctx, streamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	if n == 0 {
		return nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.Msg
	for {
		m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatalf("consumer on %s after %d messages (of %d, want %d): %v", filter, len(out), n, want, err)
		}
		out = append(out, m)
		md, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		if md.NumPending == 0 && uint64(len(out)) >= n {
			return out
		}
	}
}

// TestNativeRecordsReadByPlainConsumer: a plain nats.go consumer on
// PREFIX.> gets each record once, its data the payload as sent, the key,
// event time and sequence ID as readable headers (the producer name is the
// subject's last token; no producer or epoch header), the
// user's headers as NATS headers (repeated keys in order; keys NATS or
// this package reads, and bytes that are not header text, in their
// documented encodings), and no other message: no fence, no mark.
func TestNativeRecordsReadByPlainConsumer(t *testing.T) {
	c := startCluster(t, 1, natsjstest.Options{})
	ensureStream(t, c, natsjs.StreamConfig{})
	s := newStore(t, c, natsjs.Config{})
	when := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	sent := []broker.Record{
		{Seq: 1, Payload: []byte("hello"), Key: []byte("order-7"), EventTime: when,
			// A repeated key interleaved with others, keys out of sorted order.
			Headers: []wire.Header{{Key: "tag", Value: []byte("a")}, {Key: "src", Value: []byte("cli")}, {Key: "tag", Value: []byte("b")},
				{Key: "zone", Value: []byte("eu")}, {Key: "Accept", Value: []byte("*/*")}, {Key: "tag", Value: []byte("c")}}},
		{Seq: 2, Payload: []byte{0, 1, 2}, Key: []byte{0xff, '\n'},
			Headers: []wire.Header{{Key: "Nats-Expected-Stream", Value: []byte("other")}, {Key: "bin", Value: []byte("a\r\nb")}, {Key: "sp ace", Value: []byte(" x ")}}},
		{Seq: 3, Payload: []byte{}, Key: []byte{}},
	}
	if err := s.Fence("svc-1", 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Append("orders.eu", "svc-1", 1, sent[:2]); err != nil {
		t.Fatal(err)
	}
	if err := s.Append("orders.eu", "svc-1", 1, sent[2:]); err != nil { // one record: a batch of one message
		t.Fatal(err)
	}
	if err := s.Fence("svc-1", 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Append("orders.eu", "svc-1", 2, []broker.Record{{Seq: 4, Payload: []byte("after the fence")}}); err != nil {
		t.Fatal(err)
	}
	sent = append(sent, broker.Record{Seq: 4, Payload: []byte("after the fence")})

	js, err := jetstream.New(connect(t, c))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msgs := plainConsume(t, ctx, js, "inflight.>", len(sent))
	if len(msgs) != len(sent) {
		t.Fatalf("%d messages under inflight.>, want exactly the %d records", len(msgs), len(sent))
	}
	for i, m := range msgs {
		h := m.Headers()
		if m.Subject() != "inflight.orders.eu.svc-1" || !bytes.Equal(m.Data(), sent[i].Payload) {
			t.Errorf("message %d: %s %q, want inflight.orders.eu.svc-1 %q", i, m.Subject(), m.Data(), sent[i].Payload)
		}
		if h.Get("Inflight-Seq") != string(rune('1'+i)) {
			t.Errorf("message %d: seq %q", i, h.Get("Inflight-Seq"))
		}
		if topic, producer, ok := natsjs.ParseSubject("inflight", m.Subject()); !ok || topic != "orders.eu" || producer != "svc-1" {
			t.Errorf("message %d: subject %s", i, m.Subject())
		}
		if h.Get(layout.HdrProducer) != "svc-1" {
			t.Errorf("message %d: producer header %q, want svc-1", i, h.Get(layout.HdrProducer))
		}
		if _, ok := h[layout.HdrEpoch]; ok {
			t.Errorf("message %d has %s", i, layout.HdrEpoch)
		}
	}
	h0, h1, h2 := msgs[0].Headers(), msgs[1].Headers(), msgs[2].Headers()
	for _, tc := range []struct {
		name, got, want string
	}{
		{"key", h0.Get("Inflight-Key"), "order-7"},
		{"event time", h0.Get("Inflight-Event-Time"), "2026-01-02T03:04:05.000000006Z"},
		{"src", h0.Get("src"), "cli"},
		{"binary key", h1.Get("Inflight-Key"), "base64:/wo="},
		{"bytes that are not header text", h1.Get("bin"), "base64:YQ0KYg=="},
		{"empty key", h2.Get("Inflight-Key"), ""},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: header %q, want %q", tc.name, tc.got, tc.want)
		}
	}
	if got := h0.Values("tag"); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("repeated header: %q, want [a b c]", got)
	}
	if _, ok := h2["Inflight-Key"]; !ok {
		t.Error("an empty key is not an absent key")
	}
	if got := h1.Values("Inflight-Header"); len(got) != 2 {
		t.Errorf("Inflight-Header %q: want the reserved key and the key with a space", got)
	}
	if h1.Get("Nats-Expected-Stream") == "other" {
		t.Error("a user header reached the server as Nats-Expected-Stream")
	}
	// The header block as stored (what a client that reads the protocol
	// itself gets, here through the message-get API) has the user's
	// headers in the order they were given, and the package's decoder
	// gives back what was sent from it, and from a nats.go header map
	// (distinct keys sorted).
	for i, m := range msgs {
		md, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		hdr := rawHeaderBlock(t, js.Conn(), md.Sequence.Stream)
		fields, err := layout.ParseHeaderBlock(hdr)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		var users []string
		for _, f := range fields {
			if !strings.HasPrefix(f.Key, "Nats-") && !strings.HasPrefix(f.Key, "Inflight-") {
				users = append(users, f.Key+": "+f.Value)
			}
		}
		var want []string
		for _, uh := range sent[i].Headers {
			if k := uh.Key; layout.Text(uh.Value) && k != "sp ace" && !strings.HasPrefix(k, "Nats-") {
				want = append(want, k+": "+string(uh.Value))
			} else if k == "bin" {
				want = append(want, k+": base64:"+base64.StdEncoding.EncodeToString(uh.Value))
			}
		}
		if !slices.Equal(users, want) {
			t.Errorf("message %d: the user's header lines in the stored block %q, want %q", i, users, want)
		}
		var raw, mapped []broker.Record
		if err := layout.DecodeRaw(hdr, m.Data(), func(r broker.Record) error { raw = append(raw, cloneRecord(r)); return nil }); err != nil {
			t.Fatal(err)
		}
		if err := layout.DecodeMessage(m.Headers(), m.Data(), func(r broker.Record) error { mapped = append(mapped, cloneRecord(r)); return nil }); err != nil {
			t.Fatal(err)
		}
		sorted := sent[i]
		sorted.Headers = slices.Clone(sorted.Headers)
		slices.SortStableFunc(sorted.Headers, func(a, b wire.Header) int { return strings.Compare(a.Key, b.Key) })
		switch {
		case len(raw) != 1 || len(mapped) != 1:
			t.Errorf("decoded %d: %d and %d records", i, len(raw), len(mapped))
		default:
			if err := sameRecord(raw[0], sent[i]); err != nil {
				t.Errorf("decoded %d from the stored block: %v", i, err)
			}
			if err := sameRecord(mapped[0], sorted); err != nil {
				t.Errorf("decoded %d from nats.go's header map: %v", i, err)
			}
		}
	}
	// The fences are in the same stream, where consumers of the records do
	// not look; fast batches write no mark.
	if n := len(plainConsume(t, ctx, js, "_INFLIGHT.inflight.fence.>", 2)); n < 2 {
		t.Errorf("%d fences, want at least 2", n)
	}
	if n := len(plainConsume(t, ctx, js, "_INFLIGHT.inflight.mark.>", 0)); n != 0 {
		t.Errorf("%d marks, want none", n)
	}
}

// rawHeaderBlock returns the header block of stream message seq as the
// stream stores it (the message-get API's "hdrs").
func rawHeaderBlock(t testing.TB, nc *nats.Conn, seq uint64) []byte {
	t.Helper()
	req, _ := json.Marshal(map[string]uint64{"seq": seq})
	resp, err := nc.Request("$JS.API.STREAM.MSG.GET."+streamName, req, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Message struct {
			Hdrs []byte `json:"hdrs"`
		} `json:"message"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil || len(r.Message.Hdrs) == 0 {
		t.Fatalf("message %d: %s (%v)", seq, resp.Data, err)
	}
	return r.Message.Hdrs
}
