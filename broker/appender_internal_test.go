package broker

import (
	"testing"

	"github.com/inflightmq/inflight/wire"
)

// TestScratchGrowsOnce: an appender's scratch makes room for what one
// Append takes with one allocation: the records of the frames, less the
// ones skipped, less the frames that only ask for a receipt, at most
// maxAppendIndex of them; a scratch with room keeps its memory.
func TestScratchGrowsOnce(t *testing.T) {
	data := func(f queuedFrame) queuedFrame { f.keep = func() {}; return f }
	frames := []queuedFrame{
		data(queuedFrame{batch: wire.Batch{Count: 100}}),
		data(queuedFrame{batch: wire.Batch{Count: 50}, skip: 20}),
		{batch: wire.Batch{Count: 1000}}, // a resend: a receipt only
	}
	var a appendScratch
	if n := testing.AllocsPerRun(1, func() { a = appendScratch{}; a.grow(frames) }); n != 1 {
		t.Errorf("%v allocations, want 1", n)
	}
	if cap(a.recs) != 130 || len(a.recs) != 0 {
		t.Errorf("len %d cap %d, want 0 and 130", len(a.recs), cap(a.recs))
	}
	before := &a.recs[:1][0]
	a.grow(frames[:1])
	if &a.recs[:1][0] != before {
		t.Error("a scratch with room was given new memory")
	}

	limit := int(maxAppendIndex / recordIndex)
	a = appendScratch{}
	a.grow([]queuedFrame{data(queuedFrame{batch: wire.Batch{Count: uint32(3 * limit)}})})
	if cap(a.recs) != limit {
		t.Errorf("cap %d for more records than one Append takes, want %d", cap(a.recs), limit)
	}
}
