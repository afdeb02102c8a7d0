package wire_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/inflightmq/inflight/wire"
)

// TestRecordMetaRoundTrip builds records with every combination of key,
// headers and event time and reads them back field for field.
func TestRecordMetaRoundTrip(t *testing.T) {
	keys := [][]byte{nil, {}, []byte("k"), bytes.Repeat([]byte("K"), wire.MaxKeyLen)}
	headers := [][]wire.Header{nil, {}, {{Key: "a", Value: []byte("1")}},
		{{Key: "a", Value: nil}, {Key: "a", Value: []byte("2")}, {Key: strings.Repeat("h", wire.MaxHeaderKeyLen), Value: make([]byte, 300)}}}
	times := []time.Time{{}, time.Unix(0, 0), time.Unix(1700000000, 999999999), time.Unix(-5, 7)}
	type rec struct {
		payload, key []byte
		headers      []wire.Header
		t            time.Time
	}
	var want []rec
	var bb wire.BatchBuilder
	bb.Reset(nil, 0, 1)
	i := 0
	for _, k := range keys {
		for _, h := range headers {
			for _, tm := range times {
				p := []byte(strings.Repeat("p", i%3))
				n, err := wire.CheckMeta(k, h, tm)
				if err != nil {
					t.Fatal(err)
				}
				before := bb.Size()
				bb.AddRecord(p, k, h, tm)
				if got := bb.Size() - before; got != wire.RecordOverhead(n+len(p))+n+len(p) {
					t.Fatalf("record %d grew the batch by %d, RecordOverhead says %d", i, got, wire.RecordOverhead(n+len(p))+n+len(p))
				}
				want = append(want, rec{p, k, h, tm})
				i++
			}
		}
	}
	it := recordsOf(t, bb.Finish())
	var rr wire.RecordReader
	j := 0
	for r, ok := it.NextRecord(&rr); ok; r, ok = it.NextRecord(&rr) {
		w := want[j]
		if !bytes.Equal(r.Payload, w.payload) || !bytes.Equal(r.Key, w.key) || len(r.Headers) != len(w.headers) || !r.EventTime.Equal(w.t) {
			t.Fatalf("record %d: got %+v, want %+v", j, r, w)
		}
		if len(w.key) == 0 && r.Key != nil || len(w.headers) == 0 && r.Headers != nil {
			t.Errorf("record %d: absent field decoded as non-nil", j)
		}
		for k := range w.headers {
			if r.Headers[k].Key != w.headers[k].Key || !bytes.Equal(r.Headers[k].Value, w.headers[k].Value) {
				t.Errorf("record %d header %d: got %+v, want %+v", j, k, r.Headers[k], w.headers[k])
			}
		}
		j++
	}
	if it.Err() != nil || j != len(want) {
		t.Fatalf("read %d of %d: %v", j, len(want), it.Err())
	}
}

// TestRecordNoMetaCostsOneByte: a record without metadata costs one byte
// more than in protocol version 1 (the flags byte).
func TestRecordNoMetaCostsOneByte(t *testing.T) {
	for _, n := range []int{0, 1, 100, 126, 127, 1000} {
		v1 := len(binaryUvarint(uint64(n))) + n
		if got := wire.RecordOverhead(n) + n; got > v1+1 {
			t.Errorf("%d-byte payload: %d bytes on the wire, version 1 took %d", n, got, v1)
		}
	}
}

func binaryUvarint(x uint64) []byte {
	var b []byte
	for x >= 0x80 {
		b = append(b, byte(x)|0x80)
		x >>= 7
	}
	return append(b, byte(x))
}

// TestCheckMetaLimits checks each limit just under (accepted) and just over
// (refused with ErrMetaLimit).
func TestCheckMetaLimits(t *testing.T) {
	hs := func(n int) []wire.Header {
		h := make([]wire.Header, n)
		for i := range h {
			h[i] = wire.Header{Key: "k"}
		}
		return h
	}
	for _, tc := range []struct {
		name    string
		key     []byte
		headers []wire.Header
		t       time.Time
		ok      bool
	}{
		{"key at limit", make([]byte, wire.MaxKeyLen), nil, time.Time{}, true},
		{"key over", make([]byte, wire.MaxKeyLen+1), nil, time.Time{}, false},
		{"headers at limit", nil, hs(wire.MaxHeaders), time.Time{}, true},
		{"headers over", nil, hs(wire.MaxHeaders + 1), time.Time{}, false},
		{"header key at limit", nil, []wire.Header{{Key: strings.Repeat("k", wire.MaxHeaderKeyLen)}}, time.Time{}, true},
		{"header key over", nil, []wire.Header{{Key: strings.Repeat("k", wire.MaxHeaderKeyLen+1)}}, time.Time{}, false},
		{"header key empty", nil, []wire.Header{{Key: ""}}, time.Time{}, false},
		{"header value at limit", nil, []wire.Header{{Key: "k", Value: make([]byte, wire.MaxHeaderValueLen)}}, time.Time{}, true},
		{"header value over", nil, []wire.Header{{Key: "k", Value: make([]byte, wire.MaxHeaderValueLen+1)}}, time.Time{}, false},
		{"time 2262", nil, nil, time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{"time 2263", nil, nil, time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{"time 1678", nil, nil, time.Date(1678, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{"time 1677", nil, nil, time.Date(1677, 12, 31, 0, 0, 0, 0, time.UTC), false},
		{"time year 1", nil, nil, time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), false},
	} {
		_, err := wire.CheckMeta(tc.key, tc.headers, tc.t)
		if tc.ok && err != nil || !tc.ok && !errors.Is(err, wire.ErrMetaLimit) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	for _, tc := range []struct {
		topic string
		ok    bool
	}{
		{"a", true}, {strings.Repeat("t", wire.MaxTopicLen), true}, {"orders.EU-1_x", true},
		{"", false}, {strings.Repeat("t", wire.MaxTopicLen+1), false}, {"a b", false}, {"a/b", false}, {"é", false},
	} {
		if err := wire.CheckTopic(tc.topic); tc.ok != (err == nil) || err != nil && !errors.Is(err, wire.ErrMalformed) {
			t.Errorf("CheckTopic(%q) = %v", tc.topic, err)
		}
	}
}

// TestAllocsRecordMeta: building and reading records with a key and two
// headers allocates nothing once the buffers are warm.
func TestAllocsRecordMeta(t *testing.T) {
	p, k := make([]byte, 100), make([]byte, 16)
	hs := []wire.Header{{Key: "trace-id", Value: []byte("0af7651916cd43dd")}, {Key: "source", Value: []byte("eu-1")}}
	tm := time.Unix(1700000000, 0)
	var bb wire.BatchBuilder
	var rr wire.RecordReader
	buf := make([]byte, 0, 32<<10)
	allocs := testing.AllocsPerRun(100, func() {
		bb.Reset(buf, 0, 1)
		for range 100 {
			bb.AddRecord(p, k, hs, tm)
		}
		buf = bb.Finish()
		b, err := wire.DecodeBatch(buf)
		if err != nil {
			t.Fatal(err)
		}
		it, _ := b.Records()
		rr.Reset()
		for r, ok := it.NextRecord(&rr); ok; r, ok = it.NextRecord(&rr) {
			if len(r.Headers) != 2 {
				t.Fatal(r)
			}
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocs per batch of 100 records with metadata, want 0", allocs)
	}
}
