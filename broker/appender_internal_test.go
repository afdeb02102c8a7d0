package broker

import (
	"testing"

	"github.com/inflightmq/inflight/wire"
)

// TestScratchGrowsOnce: an appender's scratch makes room for what one
// Append takes with one allocation: the records of the frames, less the
// ones skipped, less the frames that only ask for a receipt, within
// maxAppendIndex with the headers' index counted first; a scratch with room
// keeps its memory, and one too small at least doubles.
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

	// Records with headers: the headers' index takes its share of the
	// limit first, so the slice never holds more than the charge covers.
	a = appendScratch{}
	heavy := data(queuedFrame{batch: wire.Batch{Count: 30000}, heads: 30000 * 16})
	a.grow([]queuedFrame{heavy})
	if cap(a.recs) != 0 {
		t.Errorf("cap %d for frames whose headers alone fill an Append's index, want 0 (append grows it)", cap(a.recs))
	}
	heavy.batch.Count, heavy.heads = 40000, 1000
	a.grow([]queuedFrame{heavy})
	if want := int((maxAppendIndex - 1000*headerIndex) / recordIndex); cap(a.recs) != want {
		t.Errorf("cap %d, want %d: the limit less 1000 headers", cap(a.recs), want)
	}

	// A kept scratch that is too small at least doubles.
	a = appendScratch{recs: make([]Record, 0, 300)}
	a.grow([]queuedFrame{data(queuedFrame{batch: wire.Batch{Count: 301}})})
	if cap(a.recs) != 600 {
		t.Errorf("cap %d for 301 records in a scratch of 300, want 600", cap(a.recs))
	}
	// One with records in it (a chunk being built) is left alone.
	a = appendScratch{recs: make([]Record, 1, 10)}
	a.grow([]queuedFrame{data(queuedFrame{batch: wire.Batch{Count: 100}})})
	if cap(a.recs) != 10 || len(a.recs) != 1 {
		t.Errorf("a scratch holding a record: len %d cap %d, want 1 and 10", len(a.recs), cap(a.recs))
	}
}
