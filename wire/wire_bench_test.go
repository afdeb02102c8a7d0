package wire_test

import (
	"testing"

	"github.com/inflightmq/inflight/wire"
)

const (
	benchRecords   = 100
	benchRecordLen = 100
)

func BenchmarkBatchBuild(b *testing.B) {
	rec := make([]byte, benchRecordLen)
	var bb wire.BatchBuilder
	buf := make([]byte, 0, 16<<10)
	b.SetBytes(benchRecords * benchRecordLen)
	b.ReportAllocs()
	for b.Loop() {
		bb.Reset(buf, 0, 1)
		for range benchRecords {
			bb.Add(rec)
		}
		buf = bb.Finish()
	}
	b.ReportMetric(float64(b.N*benchRecords)/b.Elapsed().Seconds(), "records/s")
}

func BenchmarkBatchDecode(b *testing.B) {
	recs := make([][]byte, benchRecords)
	for i := range recs {
		recs[i] = make([]byte, benchRecordLen)
	}
	frame := buildBatch(1, recs...)
	b.SetBytes(benchRecords * benchRecordLen)
	b.ReportAllocs()
	for b.Loop() {
		bt, err := wire.DecodeBatch(frame)
		if err != nil {
			b.Fatal(err)
		}
		it, err := bt.Records()
		if err != nil {
			b.Fatal(err)
		}
		for _, ok := it.Next(); ok; _, ok = it.Next() {
		}
		if err := it.Err(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*benchRecords)/b.Elapsed().Seconds(), "records/s")
}
