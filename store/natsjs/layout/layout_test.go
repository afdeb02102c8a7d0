package layout_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/store/natsjs/layout"
	"github.com/inflightmq/inflight/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func sample() []broker.Record {
	return []broker.Record{
		{Seq: 3, Payload: []byte("a")},
		{Seq: 4, Payload: nil, Key: []byte{}},
		{Seq: 1000, Payload: []byte("b"), Key: []byte("k"), EventTime: time.Unix(1700000000, 5),
			Headers: []wire.Header{{Key: "x", Value: []byte("1")}, {Key: "x", Value: nil}}},
		{Seq: 1 << 63, Payload: []byte("c"), Headers: []wire.Header{}},
	}
}

func decodeAll(t *testing.T, h map[string][]string, data []byte) []broker.Record {
	t.Helper()
	var got []broker.Record
	if err := layout.DecodeMessage(h, data, func(r broker.Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

func equal(a, b broker.Record) bool {
	hs := len(a.Headers) == len(b.Headers) && (a.Headers == nil) == (b.Headers == nil)
	for i := 0; hs && i < len(a.Headers); i++ {
		hs = a.Headers[i].Key == b.Headers[i].Key && bytes.Equal(a.Headers[i].Value, b.Headers[i].Value)
	}
	return hs && a.Seq == b.Seq && bytes.Equal(a.Payload, b.Payload) && bytes.Equal(a.Key, b.Key) &&
		(a.Key == nil) == (b.Key == nil) && a.EventTime.Equal(b.EventTime)
}

func TestPackedRoundTrip(t *testing.T) {
	recs := sample()
	body := layout.AppendPacked(nil, recs)
	if len(body) != layout.PackedSize(recs) {
		t.Errorf("body %d bytes, PackedSize %d", len(body), layout.PackedSize(recs))
	}
	h := map[string][]string{}
	layout.SetPackedHeaders(h, recs[0].Seq, recs[len(recs)-1].Seq)
	got := decodeAll(t, h, body)
	if len(got) != len(recs) {
		t.Fatalf("%d records, want %d", len(got), len(recs))
	}
	for i := range recs {
		if !equal(got[i], recs[i]) {
			t.Errorf("record %d: %+v, want %+v", i, got[i], recs[i])
		}
	}
	if last, err := layout.LastSeq(h); err != nil || last != 1<<63 {
		t.Errorf("LastSeq = %d, %v", last, err)
	}
	// PackedFit stops at the limit and at maxRecords.
	if n, size := layout.PackedFit(recs, 1<<20, 0); n != 4 || size != len(body) {
		t.Errorf("PackedFit all = %d, %d; want 4, %d", n, size, len(body))
	}
	if n, _ := layout.PackedFit(recs, 1<<20, 2); n != 2 {
		t.Errorf("PackedFit max 2 = %d", n)
	}
	if n, _ := layout.PackedFit(recs, 5, 0); n != 0 {
		t.Errorf("PackedFit in 5 bytes = %d", n)
	}
	n, size := layout.PackedFit(recs, layout.PackedSize(recs[:2])+12, 0)
	if n != 2 || size != layout.PackedSize(recs[:2]) {
		t.Errorf("PackedFit of two = %d, %d; want 2, %d", n, size, layout.PackedSize(recs[:2]))
	}
}

func TestPerRecordRoundTrip(t *testing.T) {
	for _, r := range sample() {
		h := map[string][]string{}
		if err := layout.SetRecordHeaders(h, &r); err != nil {
			t.Fatal(err)
		}
		got := decodeAll(t, h, r.Payload)
		if len(got) != 1 || !equal(got[0], r) {
			t.Errorf("%+v, want %+v", got, r)
		}
	}
	bad := broker.Record{Seq: 1, EventTime: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	if err := layout.SetRecordHeaders(map[string][]string{}, &bad); !errors.Is(err, layout.ErrEventTime) {
		t.Errorf("year 10000: %v, want ErrEventTime", err)
	}
}

func TestMalformed(t *testing.T) {
	recs := sample()
	body := layout.AppendPacked(nil, recs)
	h := map[string][]string{}
	layout.SetPackedHeaders(h, recs[0].Seq, recs[len(recs)-1].Seq)
	wrongLast := map[string][]string{}
	layout.SetPackedHeaders(wrongLast, recs[0].Seq, 5)
	for name, tc := range map[string]struct {
		h    map[string][]string
		data []byte
	}{
		"no layout":      {map[string][]string{}, body},
		"wrong last":     {wrongLast, body},
		"empty body":     {h, nil},
		"bad version":    {h, append([]byte{9}, body[1:]...)},
		"huge count":     {h, []byte{1, 0xff, 0xff, 0x03}},
		"trailing bytes": {h, append(bytes.Clone(body), 0)},
		"zero delta":     {h, layout.AppendPacked(nil, []broker.Record{{Seq: 3}, {Seq: 3}})},
		"bad per-record": {map[string][]string{layout.HdrLayout: {layout.PerRecord}, layout.HdrSeq: {"x"}}, nil},
	} {
		err := layout.DecodeMessage(tc.h, tc.data, func(broker.Record) error { return nil })
		if !errors.Is(err, layout.ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	// Every truncation of a valid body fails cleanly.
	for i := range len(body) {
		if err := layout.DecodePacked(body[:i], func(broker.Record) error { return nil }); !errors.Is(err, layout.ErrMalformed) {
			t.Errorf("truncated to %d: %v", i, err)
		}
	}
}

func FuzzDecodePacked(f *testing.F) {
	f.Add(layout.AppendPacked(nil, sample()))
	f.Add([]byte{1, 0})
	f.Fuzz(func(t *testing.T, body []byte) {
		var got []broker.Record
		if err := layout.DecodePacked(body, func(r broker.Record) error { got = append(got, r); return nil }); err != nil {
			return
		}
		// What decodes re-encodes to the same bytes, but for a trailing
		// minimal-encoding difference: decode again and compare.
		again := layout.AppendPacked(nil, got)
		i := 0
		if err := layout.DecodePacked(again, func(r broker.Record) error {
			if !equal(r, got[i]) {
				t.Fatalf("record %d changed on re-encoding", i)
			}
			i++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestTail: what a subject's last message says of its producer name, for
// every layout; a fence holds no record.
func TestTail(t *testing.T) {
	packed := map[string][]string{}
	layout.SetPackedHeaders(packed, 3, 9)
	epoched := map[string][]string{}
	layout.SetPackedHeaders(epoched, 3, 9)
	layout.SetEpoch(epoched, 4)
	fence := map[string][]string{}
	layout.SetFenceHeaders(fence, 5, 9)
	empty := map[string][]string{}
	layout.SetFenceHeaders(empty, 1, 0)
	for _, tc := range []struct {
		name        string
		h           map[string][]string
		last, epoch uint64
	}{
		{"packed, no epoch", packed, 9, 0},
		{"packed", epoched, 9, 4},
		{"fence", fence, 9, 5},
		{"fence of a new name", empty, 0, 1},
	} {
		last, epoch, err := layout.Tail(tc.h)
		if err != nil || last != tc.last || epoch != tc.epoch {
			t.Errorf("%s: Tail = %d, %d, %v; want %d, %d", tc.name, last, epoch, err, tc.last, tc.epoch)
		}
	}
	if got := decodeAll(t, fence, nil); len(got) != 0 {
		t.Errorf("a fence decodes to %d records", len(got))
	}
	noEpoch := map[string][]string{layout.HdrLayout: {layout.Fence}}
	badEpoch := map[string][]string{}
	layout.SetPackedHeaders(badEpoch, 3, 9)
	badEpoch[layout.HdrEpoch] = []string{"0"}
	for name, h := range map[string]map[string][]string{"fence without epoch": noEpoch, "epoch 0": badEpoch} {
		if _, _, err := layout.Tail(h); !errors.Is(err, layout.ErrMalformed) {
			t.Errorf("%s: Tail: %v, want ErrMalformed", name, err)
		}
	}
	if err := layout.DecodeMessage(fence, []byte("x"), func(broker.Record) error { return nil }); !errors.Is(err, layout.ErrMalformed) {
		t.Errorf("a fence with data: %v, want ErrMalformed", err)
	}
}

// nativeBlock is the header block of a native message holding r, as the
// store writes it (the server's check headers first).
func nativeBlock(t testing.TB, r *broker.Record) []byte {
	t.Helper()
	b := []byte("NATS/1.0\r\nNats-Expected-Last-Subject-Sequence: 7\r\n")
	b, err := layout.AppendNativeHeaders(b, "svc-1", r)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, "\r\n"...)
}

// headerMap returns the fields of a header block as a header map (what a
// NATS client gives).
func headerMap(t testing.TB, block []byte) map[string][]string {
	t.Helper()
	fields, err := layout.ParseHeaderBlock(block)
	if err != nil {
		t.Fatal(err)
	}
	h := map[string][]string{}
	for _, f := range fields {
		h[f.Key] = append(h[f.Key], f.Value)
	}
	return h
}

// TestNativeRoundTrip: a native header block decodes to the record as
// written, the user's headers in their order (repeated keys interleaved,
// reserved keys, bytes that are not header text), from the block as
// stored; from a header map, with distinct keys sorted.
func TestNativeRoundTrip(t *testing.T) {
	recs := append(sample(), broker.Record{Seq: 9, Payload: []byte("p"), Key: []byte{0xff, '\n'},
		Headers: []wire.Header{{Key: "tag", Value: []byte("a")}, {Key: "Nats-Msg-Id", Value: []byte("x")},
			{Key: "src", Value: []byte(" cli ")}, {Key: "tag", Value: []byte("base64:b")}, {Key: "a:b", Value: []byte("c")},
			{Key: "Ä", Value: []byte("ü")}, {Key: "tag", Value: []byte("c")}}})
	for _, r := range recs {
		block := nativeBlock(t, &r)
		var got []broker.Record
		if err := layout.DecodeRaw(block, r.Payload, func(r broker.Record) error { got = append(got, r); return nil }); err != nil {
			t.Fatal(err)
		}
		want := r
		if len(want.Headers) == 0 {
			want.Headers = nil // an empty list is none
		}
		if len(got) != 1 || !equal(got[0], want) {
			t.Errorf("from the block %q:\n%+v, want\n%+v", block, got, want)
		}
		got = decodeAll(t, headerMap(t, block), r.Payload)
		slices.SortStableFunc(want.Headers, func(a, b wire.Header) int { return strings.Compare(a.Key, b.Key) })
		if len(got) != 1 || !equal(got[0], want) {
			t.Errorf("from a map:\n%+v, want\n%+v", got, want)
		}
	}
	bad := broker.Record{Seq: 1, EventTime: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := layout.AppendNativeHeaders(nil, "svc-1", &bad); !errors.Is(err, layout.ErrEventTime) {
		t.Errorf("year 10000: %v, want ErrEventTime", err)
	}
}

// TestNativeEarlierRecords: a native record as written by earlier builds
// (Inflight-Epoch in every record) still decodes, Inflight-Producer and
// Inflight-Epoch left out of its headers; Producer and Tail read them. A
// record written now names its producer and has no epoch.
func TestNativeEarlierRecords(t *testing.T) {
	block := []byte("NATS/1.0\r\nNats-Expected-Last-Subject-Sequence: 7\r\n" +
		"Inflight-Producer: svc-1\r\nInflight-Seq: 4\r\nInflight-Epoch: 3\r\nInflight-Key: k\r\nsrc: cli\r\n\r\n")
	want := broker.Record{Seq: 4, Payload: []byte("p"), Key: []byte("k"), Headers: []wire.Header{{Key: "src", Value: []byte("cli")}}}
	var got []broker.Record
	if err := layout.DecodeRaw(block, want.Payload, func(r broker.Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !equal(got[0], want) {
		t.Errorf("%+v, want %+v", got, want)
	}
	h := headerMap(t, block)
	if got := decodeAll(t, h, want.Payload); len(got) != 1 || !equal(got[0], want) {
		t.Errorf("from a map: %+v, want %+v", got, want)
	}
	if last, epoch, err := layout.Tail(h); last != 4 || epoch != 3 || err != nil {
		t.Errorf("Tail = %d, %d, %v; want 4, 3", last, epoch, err)
	}
	if p := layout.Producer(h); p != "svc-1" {
		t.Errorf("Producer = %q, want svc-1", p)
	}
	now := nativeBlock(t, &want)
	if !strings.Contains(string(now), layout.HdrProducer+": svc-1\r\n") || strings.Contains(string(now), layout.HdrEpoch) {
		t.Errorf("a record written now: %q, want %s and no %s", now, layout.HdrProducer, layout.HdrEpoch)
	}
}

func TestParseHeaderBlockRefuses(t *testing.T) {
	for _, b := range []string{
		"", "NATS/1.0\r\n", "HTTP/1.0\r\n\r\n", "NATS/1.0\r\nk: v\r\n", "NATS/1.0\r\nno colon\r\n\r\n",
		"NATS/1.0\r\n: v\r\n\r\n", "NATS/1.0\r\n\r\nextra",
	} {
		if _, err := layout.ParseHeaderBlock([]byte(b)); !errors.Is(err, layout.ErrMalformed) {
			t.Errorf("%q: %v, want ErrMalformed", b, err)
		}
		if err := layout.DecodeRaw([]byte(b), nil, func(broker.Record) error { return nil }); b != "" && !errors.Is(err, layout.ErrMalformed) {
			t.Errorf("DecodeRaw %q: %v, want ErrMalformed", b, err)
		}
	}
	fields, err := layout.ParseHeaderBlock([]byte("NATS/1.0 503\r\nStatus:  x y \r\n\r\n"))
	if err != nil || len(fields) != 1 || fields[0] != (layout.HeaderField{Key: "Status", Value: "x y"}) {
		t.Errorf("%+v, %v", fields, err)
	}
}

// FuzzNativeHeaders: whatever the key, value and header bytes, a native
// header block decodes to the record as written.
func FuzzNativeHeaders(f *testing.F) {
	f.Add([]byte("k"), "src", []byte("cli"), "src", []byte("b"))
	f.Add([]byte{0, '\r'}, "Inflight-Seq", []byte(" 9"), "", []byte("base64:"))
	f.Fuzz(func(t *testing.T, key []byte, k1 string, v1 []byte, k2 string, v2 []byte) {
		r := broker.Record{Seq: 5, Payload: []byte("p"), Key: key,
			Headers: []wire.Header{{Key: k1, Value: v1}, {Key: k2, Value: v2}, {Key: k1, Value: v2}}}
		var got []broker.Record
		if err := layout.DecodeRaw(nativeBlock(t, &r), r.Payload, func(r broker.Record) error { got = append(got, r); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || !equal(got[0], r) {
			t.Fatalf("%+v, want %+v", got, r)
		}
	})
}
