package file

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/wire"
)

// TestPlanEntries: for random Appends (records as they came in frames, Raw
// set, and records built from their fields; gaps between sequence IDs on
// either side of the uvarint's byte boundaries; bodies of 0 to 20000
// bytes; records out of order now and then), planEntries splits the
// records where FrameStart says, and sizes every entry exactly as
// appendEntry writes it, out of order or not.
func TestPlanEntries(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	gaps := []uint64{0, 0, 0, 1, 126, 127, 128, 16382, 16383, 16384, 1 << 21, 1<<21 - 1}
	sizes := []int{0, 1, 99, 126, 127, 128, 200, 16383, 16384, 20000}
	for round := range 3000 {
		n := 1 + rng.IntN(40)
		recs := make([]broker.Record, n)
		seq := uint64(1 + rng.IntN(1000))
		unordered := false
		for i := range recs {
			r := &recs[i]
			r.FrameStart = i == 0 || rng.IntN(5) == 0
			if round%3 == 0 && i > 0 {
				r.FrameStart = false // records that did not come from frames: one entry
			}
			if i > 0 {
				if rng.IntN(30) == 0 && seq > 3 {
					seq -= uint64(rng.IntN(3)) // not above the one before
					unordered = true
				} else {
					seq += 1 + gaps[rng.IntN(len(gaps))]
				}
			}
			r.Seq = seq
			r.Payload = bytes.Repeat([]byte{byte(i)}, sizes[rng.IntN(len(sizes))])
			if rng.IntN(3) == 0 {
				r.Key = []byte("key")
				r.Headers = []wire.Header{{Key: "h", Value: make([]byte, rng.IntN(300))}}
				r.EventTime = time.Unix(0, rng.Int64())
			}
			if rng.IntN(2) == 0 {
				r.Raw = wire.AppendRecordBody(nil, r.Payload, r.Key, r.Headers, r.EventTime)
			}
		}

		parts, total, unord, err := planEntries(nil, "topic", "producer", recs)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if (unord != nil) != unordered {
			t.Fatalf("round %d: unordered %v, want %v", round, unord, unordered)
		}
		var wantStarts []int
		for i := range recs {
			if i == 0 || recs[i].FrameStart {
				wantStarts = append(wantStarts, i)
			}
		}
		if len(parts) != len(wantStarts) {
			t.Fatalf("round %d: %d entries, want %d", round, len(parts), len(wantStarts))
		}
		sum := 0
		for k, p := range parts {
			wantEnd := len(recs)
			if k+1 < len(wantStarts) {
				wantEnd = wantStarts[k+1]
			}
			if p.start != wantStarts[k] || p.end != wantEnd {
				t.Fatalf("round %d: entry %d is records %d to %d, want %d to %d", round, k, p.start, p.end, wantStarts[k], wantEnd)
			}
			got := len(appendEntry(nil, "topic", "producer", recs[p.start:p.end], p.body))
			if got != entryHeaderSize+p.body {
				t.Fatalf("round %d: entry %d written in %d bytes, sized %d", round, k, got, entryHeaderSize+p.body)
			}
			sum += got
		}
		if total != sum {
			t.Fatalf("round %d: total %d, written %d", round, total, sum)
		}
	}
}

// TestPlanEntriesTooLarge: an entry of exactly maxEntryBody is taken, one a
// byte over is refused, and the error counts the records of that whole
// entry, as it always has, wherever the entry is in the Append.
func TestPlanEntriesTooLarge(t *testing.T) {
	const head = 1 + 1 + 1 + 1 + 1 + 8 + 4 // topic "t", producer "p"
	mib := make([]byte, 1<<20)
	// 1023 records of 1 MiB (1 + 3 + 1 MiB each) and a last one that
	// fills the body to maxEntryBody exactly.
	last := maxEntryBody - head - 1023*(1+3+1<<20) - 1 - 3
	entry := func(first uint64, lastLen int) []broker.Record {
		recs := make([]broker.Record, 1024)
		for i := range recs {
			recs[i] = broker.Record{Seq: first + uint64(i), Raw: mib, FrameStart: i == 0}
		}
		recs[1023].Raw = make([]byte, lastLen)
		return recs
	}
	small := []broker.Record{{Seq: 1, Raw: []byte{0, 'a'}, FrameStart: true}, {Seq: 2, Raw: []byte{0, 'b'}}}

	parts, _, _, err := planEntries(nil, "t", "p", append(small, entry(3, last)...))
	if err != nil {
		t.Fatalf("an entry of maxEntryBody: %v", err)
	}
	if len(parts) != 2 || parts[1].body != maxEntryBody {
		t.Fatalf("parts %+v, want the second of %d bytes", parts, maxEntryBody)
	}
	_, _, _, err = planEntries(nil, "t", "p", append(small, entry(3, last+1)...))
	if err == nil || err.Error() != "entry of 1024 records over 1073741824 bytes" {
		t.Fatalf("a byte over: err = %v", err)
	}
}

// BenchmarkEncodeEntries: what an Append of 4 producer frames of 4096
// records of 100 bytes (Raw set, as the broker hands them over) costs the
// store's own code, without the write: planEntries, then appendEntry per
// frame into a reused buffer. BenchmarkAppendFrames adds the write and the
// page cache, whose cost varies from run to run.
func BenchmarkEncodeEntries(b *testing.B) {
	const frames, perFrame = 4, 4096
	recs := make([]broker.Record, frames*perFrame)
	raw := wire.AppendRecordBody(nil, bytes.Repeat([]byte{'x'}, 100), nil, nil, time.Time{})
	for i := range recs {
		recs[i] = broker.Record{Seq: uint64(i + 1), Payload: raw[1:], Raw: raw, FrameStart: i%perFrame == 0}
	}
	var buf []byte
	var room [16]entryPart
	b.ReportAllocs()
	for b.Loop() {
		parts, _, unordered, err := planEntries(room[:0], "topic", "producer", recs)
		if err != nil || unordered != nil {
			b.Fatal(err, unordered)
		}
		buf = buf[:0]
		for _, p := range parts {
			buf = appendEntry(buf, "topic", "producer", recs[p.start:p.end], p.body)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
}
