package wire_test

import (
	"testing"

	"github.com/inflightmq/inflight/wire"
)

// The hot paths must not allocate: they run once per batch or receipt on
// the producer and the broker.

func TestAllocsBatchBuild(t *testing.T) {
	rec := make([]byte, 100)
	var bb wire.BatchBuilder
	buf := make([]byte, 0, 16<<10)
	allocs := testing.AllocsPerRun(100, func() {
		bb.Reset(buf, 0, 1)
		for range 100 {
			bb.Add(rec)
		}
		buf = bb.Finish()
	})
	if allocs != 0 {
		t.Errorf("build: %v allocs per batch, want 0", allocs)
	}
}

func TestAllocsBatchDecode(t *testing.T) {
	frame := buildBatch(1, make([][]byte, 100)...)
	var total int
	allocs := testing.AllocsPerRun(100, func() {
		b, err := wire.DecodeBatch(frame)
		if err != nil {
			t.Fatal(err)
		}
		it, err := b.Records()
		if err != nil {
			t.Fatal(err)
		}
		for rec, ok := it.Next(); ok; rec, ok = it.Next() {
			total += len(rec) + 1
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
	})
	if allocs != 0 {
		t.Errorf("decode: %v allocs per batch, want 0", allocs)
	}
}

func TestAllocsReceipt(t *testing.T) {
	buf := make([]byte, 0, 64)
	rs := make([]wire.Receipt, 0, 4)
	var seq uint64
	allocs := testing.AllocsPerRun(100, func() {
		seq++
		in := []wire.Receipt{{Topic: 1, Seq: seq}, {Topic: 7, Seq: seq + 1}}
		frame := wire.AppendReceipts(buf[:0], in)
		out, err := wire.DecodeReceipts(frame, rs[:0])
		if err != nil || len(out) != 2 || out[0] != in[0] || out[1] != in[1] {
			t.Fatal(out, err)
		}
	})
	if allocs != 0 {
		t.Errorf("receipt: %v allocs per round trip, want 0", allocs)
	}
}
