package layout_test

import (
	"testing"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/store/natsjs/layout"
)

// benchRecords are 4096 records of 100 bytes, as one producer batch.
func benchRecords() []broker.Record {
	recs := make([]broker.Record, 4096)
	for i := range recs {
		recs[i] = broker.Record{Seq: uint64(i + 1), Payload: make([]byte, 100)}
	}
	return recs
}

// BenchmarkAppendPacked: the store's hot path per Append (size, then
// encode into a reused buffer). One op is a batch of 4096 records; no
// allocation.
func BenchmarkAppendPacked(b *testing.B) {
	recs := benchRecords()
	buf := make([]byte, 0, layout.PackedSize(recs))
	b.ReportAllocs()
	b.SetBytes(int64(100 * len(recs)))
	for b.Loop() {
		for i := 0; i < len(recs); {
			n, _ := layout.PackedFit(recs[i:], 1<<20, 0)
			buf = layout.AppendPacked(buf[:0], recs[i:i+n])
			i += n
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
}

// BenchmarkDecodePacked: a consumer's decoding of a packed body. No
// allocation for records without headers.
func BenchmarkDecodePacked(b *testing.B) {
	body := layout.AppendPacked(nil, benchRecords())
	var n int
	fn := func(broker.Record) error { n++; return nil }
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := layout.DecodePacked(body, fn); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/record")
}
