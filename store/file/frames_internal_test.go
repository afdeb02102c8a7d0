package file

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/wire"
)

// randomFrame builds a producer frame of 1 to 60 records from first: bodies
// on either side of a uvarint's byte boundaries (a wire length of 127 is a
// stored length of 128), some with metadata; it returns the frame as the
// broker hands it to AppendFrames and as the Records it would build.
func randomFrame(rng *rand.Rand, first uint64) (broker.Frame, []broker.Record) {
	sizes := []int{0, 1, 99, 125, 126, 127, 128, 200, 16381, 16382, 16383, 16384, 20000}
	n := 1 + rng.IntN(60)
	pick := make([]int, n)
	for i := range pick {
		pick[i] = sizes[rng.IntN(len(sizes))]
	}
	return frameOfSizes(rng, first, pick)
}

// frameOfSizes is randomFrame's frame of records of the given payload
// sizes, a third of them with metadata.
func frameOfSizes(rng *rand.Rand, first uint64, sizes []int) (broker.Frame, []broker.Record) {
	var bb wire.BatchBuilder
	bb.Reset(nil, 0, first)
	n := len(sizes)
	for i, size := range sizes {
		p := bytes.Repeat([]byte{byte(i)}, size)
		if rng.IntN(3) == 0 {
			bb.AddRecord(p, []byte("key"), []wire.Header{{Key: "h", Value: make([]byte, rng.IntN(300))}}, time.Unix(0, rng.Int64()))
		} else {
			bb.Add(p)
		}
	}
	batch, err := wire.DecodeBatch(bb.Finish())
	if err != nil {
		panic(err)
	}
	it, err := batch.Records()
	if err != nil {
		panic(err)
	}
	var recs []broker.Record
	for raw, ok := it.Next(); ok; raw, ok = it.Next() {
		recs = append(recs, broker.Record{Seq: first + uint64(len(recs)), Raw: raw, FrameStart: len(recs) == 0})
	}
	return broker.Frame{FirstSeq: first, Count: n, Records: batch.Data}, recs
}

// TestAppendFrameEntryIsAppendEntry: for random frames, the entry
// AppendFrames writes is, byte for byte, the one Append writes for the
// Records the broker builds of the same frame: the reader, recovery and
// everything else that reads entries need nothing new.
func TestAppendFrameEntryIsAppendEntry(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 2000 {
		first := 1 + rng.Uint64N(1<<40)
		fr, recs := randomFrame(rng, first)
		if round == 0 { // lengths on either side of the uvarint's third byte boundary
			fr, recs = frameOfSizes(rng, first, []int{1<<21 - 3, 1<<21 - 2, 1<<21 - 1, 1 << 21})
		}
		parts, _, unordered, err := planEntries(nil, "topic", "producer", recs)
		if err != nil || unordered != nil || len(parts) != 1 {
			t.Fatalf("round %d: planEntries: %v %v %d entries", round, err, unordered, len(parts))
		}
		want := appendEntry([]byte("before"), "topic", "producer", recs, parts[0].body)
		got, err := appendFrameEntry([]byte("before"), "topic", "producer", fr)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("round %d: %d records from %d: the frame's entry differs from Append's (%d and %d bytes)", round, fr.Count, first, len(got), len(want))
		}
	}
}

// TestAppendFrameEntryRefuses: a records block that does not hold Count
// records, or a frame whose count or sequence IDs are out of range, is an
// error, and buf comes back as it was given.
func TestAppendFrameEntryRefuses(t *testing.T) {
	fr, _ := randomFrame(rand.New(rand.NewPCG(5, 6)), 10)
	cases := map[string]broker.Frame{
		"a record more than the block holds": {FirstSeq: 10, Count: fr.Count + 1, Records: fr.Records},
		"a record less":                      {FirstSeq: 10, Count: fr.Count - 1, Records: fr.Records},
		"the last byte cut":                  {FirstSeq: 10, Count: fr.Count, Records: fr.Records[:len(fr.Records)-1]},
		"a byte after the last record":       {FirstSeq: 10, Count: fr.Count, Records: append(bytes.Clone(fr.Records), 0)},
		"no records":                         {FirstSeq: 10, Count: 0, Records: nil},
		"sequence ID 0":                      {FirstSeq: 0, Count: fr.Count, Records: fr.Records},
		"past the last sequence ID":          {FirstSeq: math.MaxUint64 - uint64(fr.Count) + 2, Count: fr.Count, Records: fr.Records},
	}
	if fr.Count == 1 {
		delete(cases, "a record less")
	}
	for name, bad := range cases {
		buf, err := appendFrameEntry([]byte("before"), "topic", "producer", bad)
		if err == nil {
			t.Errorf("%s: no error", name)
		}
		if string(buf) != "before" {
			t.Errorf("%s: buf is %d bytes, want it as it was", name, len(buf))
		}
	}
}

// TestAppendFrameEntryAllocates: encoding frames into a buffer with room
// allocates nothing, records with metadata included (checkRaw's readers
// are pooled).
func TestAppendFrameEntryAllocates(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var frames []broker.Frame
	for range 4 {
		fr, _ := frameOfSizes(rng, 1, []int{100, 100, 100, 100, 100, 100})
		frames = append(frames, fr)
	}
	buf := make([]byte, 0, 1<<20)
	encode := func() {
		buf = buf[:0]
		for _, fr := range frames {
			var err error
			if buf, err = appendFrameEntry(buf, "topic", "producer", fr); err != nil {
				t.Fatal(err)
			}
		}
	}
	if testkit.RaceEnabled {
		t.Skip("sync.Pool drops items under -race")
	}
	encode() // warm the readers' pool
	if n := testing.AllocsPerRun(100, encode); n != 0 {
		t.Errorf("%v allocations per 4 frames", n)
	}
}

// BenchmarkEncodeFrames is BenchmarkEncodeEntries through AppendFrames'
// encoding: the same 4 frames of 4096 records of 100 bytes, as the wire
// carries them, encoded into a reused buffer.
func BenchmarkEncodeFrames(b *testing.B) {
	const frames, perFrame = 4, 4096
	fs := make([]broker.Frame, frames)
	for i := range fs {
		var bb wire.BatchBuilder
		bb.Reset(nil, 0, uint64(1+i*perFrame))
		for range perFrame {
			bb.Add(bytes.Repeat([]byte{'x'}, 100))
		}
		batch, err := wire.DecodeBatch(bb.Finish())
		if err != nil {
			b.Fatal(err)
		}
		fs[i] = broker.Frame{FirstSeq: batch.FirstSeq, Count: perFrame, Records: batch.Data}
	}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = buf[:0]
		for _, fr := range fs {
			var err error
			if buf, err = appendFrameEntry(buf, "topic", "producer", fr); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*frames*perFrame), "ns/record")
}
