package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/inflightmq/inflight/wire"
)

func TestBatchRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte{0xCD}, 1<<14) // needs a three-byte uvarint length
	for _, tc := range []struct {
		name     string
		firstSeq uint64
		recs     [][]byte
	}{
		{"one", 1, [][]byte{[]byte("x")}},
		{"one empty", 1, [][]byte{{}}},
		{"all empty", 9, [][]byte{{}, {}, {}, {}}},
		{"varint widths", 100, [][]byte{make([]byte, 127), make([]byte, 128), big, {}, []byte("tail")}},
		{"last seq is max", wire.MaxSeq - 2, [][]byte{[]byte("a"), []byte("b"), []byte("c")}},
		{"single at max", wire.MaxSeq, [][]byte{[]byte("z")}},
	} {
		frame := buildBatch(tc.firstSeq, tc.recs...)
		b, err := wire.DecodeBatch(frame)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		wantLast := tc.firstSeq + uint64(len(tc.recs)) - 1
		if b.FirstSeq != tc.firstSeq || int(b.Count) != len(tc.recs) || b.LastSeq() != wantLast ||
			b.Codec != wire.CodecNone || int(b.RawLen) != len(b.Data) ||
			b.CRC != crc32.Checksum(b.Data, castagnoli) {
			t.Errorf("%s: header %+v", tc.name, b)
		}
		if !bytes.Equal(b.Data, frame[wire.BatchHeaderSize:]) {
			t.Errorf("%s: Data is not the frame tail", tc.name)
		}

		it, err := b.Records()
		if err != nil {
			t.Fatalf("%s: Records: %v", tc.name, err)
		}
		var i int
		var rr wire.RecordReader
		for rec, ok := it.NextRecord(&rr); ok; rec, ok = it.NextRecord(&rr) {
			if !bytes.Equal(rec.Payload, tc.recs[i]) || cap(rec.Payload) != len(rec.Payload) || rec.Key != nil || rec.Headers != nil || !rec.EventTime.IsZero() {
				t.Errorf("%s: record %d = %+v (cap %d), want payload %q", tc.name, i, rec, cap(rec.Payload), tc.recs[i])
			}
			i++
		}
		if err := it.Err(); err != nil || i != len(tc.recs) {
			t.Errorf("%s: iterated %d of %d records, Err %v", tc.name, i, len(tc.recs), err)
		}

		got, err := b.AppendRecords([][]byte{[]byte("keep")})
		if err != nil || len(got) != 1+len(tc.recs) || string(got[0]) != "keep" {
			t.Fatalf("%s: AppendRecords = %d records, %v", tc.name, len(got), err)
		}
		if !slices.EqualFunc(got[1:], tc.recs, bytes.Equal) {
			t.Errorf("%s: AppendRecords records differ", tc.name)
		}
	}
}

// patched returns a copy of frame with the batch header edited by edit and
// the CRC recomputed, so that the error under test is not masked by
// ErrChecksum.
func patched(frame []byte, edit func(f []byte)) []byte {
	f := append([]byte(nil), frame...)
	edit(f)
	binary.BigEndian.PutUint32(f[26:], crc32.Checksum(f[wire.BatchHeaderSize:], castagnoli))
	return f
}

func TestDecodeBatchErrors(t *testing.T) {
	valid := buildBatch(10, []byte("abc"), []byte("de"))
	be := binary.BigEndian
	flipped := append([]byte(nil), valid...)
	flipped[wire.BatchHeaderSize+1] ^= 0x01 // a data byte; CRC left stale
	badCRC := append([]byte(nil), valid...)
	badCRC[27] ^= 0x80

	for _, tc := range []struct {
		name  string
		frame []byte
		want  error
	}{
		{"zero count", patched(valid, func(f []byte) { be.PutUint32(f[17:], 0) }), wire.ErrMalformed},
		{"zero first seq", patched(valid, func(f []byte) { be.PutUint64(f[9:], 0) }), wire.ErrMalformed},
		{"seq overflow", patched(valid, func(f []byte) { be.PutUint64(f[9:], math.MaxUint64) }), wire.ErrMalformed},
		{"raw len below count", rawBatch(1, 5, wire.CodecZstd, 4, []byte("data")), wire.ErrMalformed},
		{"raw len mismatch", patched(valid, func(f []byte) { be.PutUint32(f[22:], 4) }), wire.ErrMalformed},
		{"raw len too big", patched(valid, func(f []byte) { be.PutUint32(f[22:], 1<<20) }), wire.ErrMalformed},
		{"codec 4", patched(valid, func(f []byte) { f[21] = 4 }), wire.ErrUnsupportedCodec},
		{"codec 9", patched(valid, func(f []byte) { f[21] = 9 }), wire.ErrUnsupportedCodec},
		{"flipped data byte", flipped, wire.ErrChecksum},
		{"flipped crc", badCRC, wire.ErrChecksum},
		{"any topic id", patched(valid, func(f []byte) { be.PutUint32(f[5:], math.MaxUint32) }), nil},
		{"header only", frameOf(wire.TypeBatch, make([]byte, 24)), wire.ErrTruncated},
	} {
		_, err := wire.DecodeBatch(tc.frame)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestRecordErrors checks a valid header over a records block that does
// not match it.
func TestRecordErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		count uint32
		data  []byte
	}{
		{"fewer records than count", 4, []byte{1, 0, 'a', 1, 0, 'b', 0, 0}},
		{"fewer records than count, data ends mid-record", 2, []byte{1, 0, 'a', 2, 0, 'c'}},
		{"more records than count", 1, []byte{1, 0, 'a', 1, 0, 'b'}},
		{"record length past end", 1, []byte{9, 0, 'a', 'b'}},
		{"two-byte record length past end", 1, append([]byte{0x80, 0x01, 0}, make([]byte, 127)...)},
		{"three-byte record length past end", 1, append([]byte{0x80, 0x80, 0x01, 0}, make([]byte, 200)...)},
		{"flags byte missing", 2, []byte{1, 0, 'a', 0}},
		{"uvarint never ends", 1, []byte{0x80, 0x80, 0x80}},
		{"uvarint overflows", 1, bytes.Repeat([]byte{0xff}, 11)},
		{"uvarint not minimal", 1, []byte{0x81, 0x00, 0, 'a'}},
		{"zero as two bytes", 1, []byte{0x80, 0x00, 0}},
		{"unknown flag", 1, []byte{1, 8, 'a'}},
		{"key flag, empty key", 1, []byte{2, 1, 0, 'a'}},
		{"key past the record", 1, []byte{2, 1, 5, 'a'}},
		{"key length not minimal", 1, []byte{3, 1, 0x81, 0x00, 'k'}},
		{"key over the limit", 1, append([]byte{0x83, 0x40, 1, 0x81, 0x20}, make([]byte, 8193)...)},
		{"headers flag, zero headers", 1, []byte{1, 2, 0}},
		{"header count over the limit", 1, append([]byte{0x83, 0x01, 2, 65}, make([]byte, 130)...)},
		{"header count past the record", 1, []byte{3, 2, 3, 1, 'k'}},
		{"header with an empty key", 1, []byte{3, 2, 1, 0, 0}},
		{"header value past the record", 1, []byte{5, 2, 1, 1, 'k', 9, 'v'}},
		{"event time cut short", 1, []byte{4, 4, 0, 0, 0, 0}},
	} {
		frame := rawBatch(1, tc.count, wire.CodecNone, uint32(len(tc.data)), tc.data)
		b, err := wire.DecodeBatch(frame)
		if err != nil {
			t.Fatalf("%s: DecodeBatch: %v", tc.name, err)
		}
		it, err := b.Records()
		if err != nil {
			t.Fatalf("%s: Records: %v", tc.name, err)
		}
		var rr wire.RecordReader
		for _, ok := it.NextRecord(&rr); ok; _, ok = it.NextRecord(&rr) {
		}
		if err := it.Err(); !errors.Is(err, wire.ErrMalformed) {
			t.Errorf("%s: Err = %v, want ErrMalformed", tc.name, err)
		}
		if _, ok := it.Next(); ok {
			t.Errorf("%s: Next after failure returned a record", tc.name)
		}
		dst := [][]byte{[]byte("keep")}
		got, err := b.AppendRecords(dst)
		if !errors.Is(err, wire.ErrMalformed) || len(got) != 1 {
			t.Errorf("%s: AppendRecords = %d, %v; want dst unchanged, ErrMalformed", tc.name, len(got), err)
		}
	}
}

func TestRecordsCodec(t *testing.T) {
	for _, c := range []wire.Codec{wire.CodecZstd, wire.CodecS2, wire.CodecSnappy} {
		b, err := wire.DecodeBatch(rawBatch(3, 2, c, 100, []byte("compressed bytes")))
		if err != nil || b.Codec != c || b.RawLen != 100 || string(b.Data) != "compressed bytes" {
			t.Fatalf("%v: DecodeBatch = %+v, %v", c, b, err)
		}
		if _, err := b.Records(); !errors.Is(err, wire.ErrUnsupportedCodec) {
			t.Errorf("%v: Records: %v, want ErrUnsupportedCodec", c, err)
		}
		if _, err := b.AppendRecords(nil); !errors.Is(err, wire.ErrUnsupportedCodec) {
			t.Errorf("%v: AppendRecords: %v, want ErrUnsupportedCodec", c, err)
		}
	}
	// A hand-made Batch whose RawLen disagrees with Data.
	b := wire.Batch{FirstSeq: 1, Count: 1, RawLen: 5, Data: []byte{0}}
	if _, err := b.Records(); !errors.Is(err, wire.ErrMalformed) {
		t.Errorf("Records with bad RawLen: %v, want ErrMalformed", err)
	}
	var zero wire.RecordIter
	if _, ok := zero.Next(); ok || zero.Err() != nil {
		t.Error("zero RecordIter is not empty")
	}
}

// TestBatchMaxFrame builds a batch of exactly DefaultMaxFrameSize bytes.
func TestBatchMaxFrame(t *testing.T) {
	rec := bytes.Repeat([]byte("r"), 1000)
	var bb wire.BatchBuilder
	bb.Reset(make([]byte, 0, wire.DefaultMaxFrameSize), 0, 1)
	for bb.Size()+2*(wire.RecordOverhead(len(rec))+len(rec)) <= wire.DefaultMaxFrameSize {
		bb.Add(rec)
	}
	// Fill the rest with one record whose length plus overhead fits exactly.
	left := wire.DefaultMaxFrameSize - bb.Size()
	last := -1
	for n := left; n >= 0; n-- {
		if n+wire.RecordOverhead(n) == left {
			last = n
			break
		}
	}
	if last < 0 {
		t.Fatalf("no record fills %d bytes", left)
	}
	bb.Add(make([]byte, last))
	if bb.Size() != wire.DefaultMaxFrameSize {
		t.Fatalf("Size = %d", bb.Size())
	}
	frame := bb.Finish()
	if len(frame) != wire.DefaultMaxFrameSize {
		t.Fatalf("frame is %d bytes", len(frame))
	}

	got, n, err := wire.Split(frame, wire.DefaultMaxFrameSize)
	if err != nil || n != len(frame) {
		t.Fatalf("Split = %d, %v", n, err)
	}
	b, err := wire.DecodeBatch(got)
	if err != nil || int(b.Count) != bb.Count() {
		t.Fatalf("DecodeBatch = %d records, %v", b.Count, err)
	}
	recs, err := b.AppendRecords(nil)
	if err != nil || len(recs) != bb.Count() || len(recs[len(recs)-1]) != last {
		t.Fatalf("AppendRecords = %d, %v", len(recs), err)
	}

	bb.Add(nil) // one byte over
	if _, _, err := wire.Split(bb.Finish(), wire.DefaultMaxFrameSize); !errors.Is(err, wire.ErrFrameTooLarge) {
		t.Errorf("Split of one byte more: %v, want ErrFrameTooLarge", err)
	}
}

func TestBatchBuilder(t *testing.T) {
	var bb wire.BatchBuilder
	if bb.Size() != wire.BatchHeaderSize || bb.Count() != 0 {
		t.Errorf("zero builder: Size %d Count %d", bb.Size(), bb.Count())
	}
	bb.Add([]byte("zero value works")) // as if Reset(nil, 0)
	if _, err := wire.DecodeBatch(bb.Finish()); !errors.Is(err, wire.ErrMalformed) {
		t.Errorf("firstSeq 0 batch: %v, want ErrMalformed", err)
	}

	buf := make([]byte, 0, 4096)
	bb.Reset(buf, 0, 77)
	if bb.FirstSeq() != 77 || bb.Size() != wire.BatchHeaderSize || bb.Count() != 0 {
		t.Fatalf("after Reset: FirstSeq %d Size %d Count %d", bb.FirstSeq(), bb.Size(), bb.Count())
	}
	for _, n := range []int{0, 1, 127, 128, 300} {
		before := bb.Size()
		bb.Add(make([]byte, n))
		if bb.Size() != before+wire.RecordOverhead(n)+n {
			t.Errorf("Add(%d bytes): Size %d -> %d", n, before, bb.Size())
		}
	}
	frame := bb.Finish()
	if &frame[0] != &buf[:1][0] || len(frame) != bb.Size() {
		t.Error("Finish did not build in the given buffer")
	}
	if _, err := wire.DecodeBatch(frame); err != nil {
		t.Fatal(err)
	}

	// Reuse the returned frame's memory for the next batch.
	bb.Reset(frame, 0, 82)
	bb.Add([]byte("again"))
	next := bb.Finish()
	if &next[0] != &buf[:1][0] {
		t.Error("Reset with the returned frame did not reuse its memory")
	}
	if want := buildBatch(82, []byte("again")); !bytes.Equal(next, want) {
		t.Errorf("reused builder: %x, want %x", next, want)
	}

	// Finish with nothing added still yields a whole (if invalid) frame.
	bb.Reset(nil, 0, 5)
	empty := bb.Finish()
	if len(empty) != wire.BatchHeaderSize {
		t.Fatalf("empty frame is %d bytes", len(empty))
	}
	if _, err := wire.DecodeBatch(empty); !errors.Is(err, wire.ErrMalformed) {
		t.Errorf("empty batch: %v, want ErrMalformed", err)
	}
}

func TestRecordOverhead(t *testing.T) {
	for _, tc := range []struct{ n, want int }{
		// The uvarint of n, and the flags byte.
		{-1, 2}, {0, 2}, {127, 2}, {128, 3}, {16383, 3}, {16384, 4}, {1<<21 - 1, 4}, {1 << 21, 5},
	} {
		if got := wire.RecordOverhead(tc.n); got != tc.want {
			t.Errorf("RecordOverhead(%d) = %d, want %d", tc.n, got, tc.want)
		}
		if tc.n >= 0 && 1+len(binary.AppendUvarint(nil, uint64(tc.n))) != tc.want {
			t.Errorf("table disagrees with binary.AppendUvarint for %d", tc.n)
		}
	}
}

func TestCRCKnownAnswer(t *testing.T) {
	// The CRC-32C check value; guards against a wrong polynomial.
	if got := crc32.Checksum([]byte("123456789"), castagnoli); got != 0xE3069283 {
		t.Fatalf("CRC-32C check value %08x", got)
	}
}

// TestBatchTopic: the topic id given to Reset is in the frame, compressed
// or not, and DecodeBatch reads it back.
func TestBatchTopic(t *testing.T) {
	c, err := wire.NewCompressor(wire.CodecS2, wire.LevelDefault)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint32{0, 1, 0xdeadbeef, math.MaxUint32} {
		var bb wire.BatchBuilder
		bb.Reset(nil, id, 5)
		for range 20 {
			bb.Add(bytes.Repeat([]byte("compressible "), 10))
		}
		if bb.Topic() != id {
			t.Fatalf("Topic() = %d, want %d", bb.Topic(), id)
		}
		for _, compress := range []bool{false, true} {
			var frame []byte
			if compress {
				var ok bool
				if frame, ok = bb.FinishCompressed(c, nil); !ok {
					t.Fatal("not compressed")
				}
			} else {
				frame = bb.Finish()
			}
			b, err := wire.DecodeBatch(frame)
			if err != nil || b.Topic != id || b.FirstSeq != 5 || b.Count != 20 {
				t.Errorf("topic %d, compressed %v: %+v, %v", id, compress, b, err)
			}
		}
	}
}

// TestRecordLengthSpellings reads records whose lengths take one, two and
// three uvarint bytes, at each boundary, spelled independently of the
// package, with the last record ending the data exactly: Next takes the
// one- and two-byte ones inline and the others through its general case.
func TestRecordLengthSpellings(t *testing.T) {
	lengths := []int{0, 1, 126, 127, 128, 129, 16382, 16383, 16384, 70000, 0}
	var data []byte
	var want [][]byte
	for i, n := range lengths {
		rec := append([]byte{0}, bytes.Repeat([]byte{byte(i + 1)}, n)...) // flags, payload
		data = append(binary.AppendUvarint(data, uint64(n)), rec...)
		want = append(want, rec)
	}
	it := recordsOf(t, rawBatch(1, uint32(len(lengths)), wire.CodecNone, uint32(len(data)), data))
	i := 0
	for rec, ok := it.Next(); ok; rec, ok = it.Next() {
		if i >= len(want) || !bytes.Equal(rec, want[i]) || cap(rec) != len(rec) {
			t.Fatalf("record %d: %d bytes (cap %d), want %d", i, len(rec), cap(rec), len(want[min(i, len(want)-1)]))
		}
		i++
	}
	if err := it.Err(); err != nil || i != len(want) {
		t.Fatalf("read %d of %d records, Err %v", i, len(want), err)
	}
}

// TestBatchBuilderGrow: after Grow(n, limit), n bytes of records fit
// without another allocation; growing at least doubles the capacity, up to
// the limit, a need beyond the limit still fits, and the records added
// before each growth are in the frame, byte for byte.
func TestBatchBuilderGrow(t *testing.T) {
	var bb wire.BatchBuilder
	bb.Reset(make([]byte, 0, 100), 0, 1)
	rec := func(i int) []byte { return bytes.Repeat([]byte{byte(i + 1)}, 997) } // 1000 bytes in the frame, with its length and flags
	bb.Grow(1000, 1<<20)
	if got := cap(bb.Bytes()); got != 1030 {
		t.Errorf("cap %d after Grow(1000) from 100 bytes, want 1030 (what is needed)", got)
	}
	room := &bb.Bytes()[:1][0]
	bb.Add(rec(0))
	if &bb.Bytes()[0] != room || bb.Size() != 1030 {
		t.Errorf("adding the 1000 bytes Grow made room for moved the frame (size %d)", bb.Size())
	}
	bb.Grow(1000, 1<<20)
	if got := cap(bb.Bytes()); got != 2060 {
		t.Errorf("cap %d after a second Grow(1000), want 2060 (doubled)", got)
	}
	bb.Add(rec(1))
	bb.Grow(10000, 3000)
	if got := cap(bb.Bytes()); got != bb.Size()+10000 {
		t.Errorf("cap %d for a need beyond the limit, want %d", got, bb.Size()+10000)
	}
	bb.Add(rec(2))
	bb.Grow(10000, 1<<20)
	if got, want := cap(bb.Bytes()), 2*(2030+10000); got != want {
		t.Errorf("cap %d, want %d (doubled)", got, want)
	}
	bb.Add(rec(3))
	it := recordsOf(t, bb.Finish())
	for i := 0; i < 4; i++ {
		raw, ok := it.Next()
		if p, plain := wire.PlainPayload(raw); !ok || !plain || !bytes.Equal(p, rec(i)) {
			t.Fatalf("record %d after the growths: %x", i, raw)
		}
	}

	bb.Reset(make([]byte, 0, 2000), 0, 1)
	bb.Add(rec(0))
	bb.Grow(1000, 2500)
	if got := cap(bb.Bytes()); got != 2500 {
		t.Errorf("cap %d, want the limit 2500 (doubling would pass it)", got)
	}
}

// TestBatchBuilderSum: a frame whose CRC was taken in steps (Sum between
// records, growths and all) is the frame built without them, byte for
// byte, with the CRC hash/crc32 computes; Sum does nothing on an empty or
// a taken builder, whose next batch starts afresh.
func TestBatchBuilderSum(t *testing.T) {
	var bb wire.BatchBuilder
	bb.Sum() // the zero value: nothing to sum
	bb.Reset(nil, 0, 1)
	bb.Sum()
	bb.Add([]byte("after a sum of nothing"))
	checkSummed(t, bb.Finish(), [][]byte{[]byte("after a sum of nothing")})
	frame := bb.Take(nil, nil)
	bb.Sum() // taken: its buffer is empty
	bb.Reset(frame, 0, 1)
	bb.Sum()
	bb.Add([]byte("a new batch"))
	checkSummed(t, bb.Finish(), [][]byte{[]byte("a new batch")})

	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		var recs [][]byte
		bb.Reset(nil, 0, 1)
		for range 1 + rng.IntN(40) {
			p := make([]byte, rng.IntN(3000))
			for i := range p {
				p[i] = byte(rng.Uint32())
			}
			if rng.IntN(4) == 0 {
				bb.Grow(rng.IntN(8000), 1<<20) // may move the frame
			}
			bb.Add(p)
			recs = append(recs, p)
			if rng.IntN(3) == 0 {
				bb.Sum()
			}
		}
		if got, want := bb.Finish(), addAll(1, recs); !bytes.Equal(got, want) {
			t.Fatalf("round %d: %d records summed in steps: a different frame", round, len(recs))
		}
		checkSummed(t, bb.Finish(), recs) // Finish again: the same
	}
}

// addAll returns the frame Add builds of recs, the first with firstSeq.
func addAll(firstSeq uint64, recs [][]byte) []byte {
	var bb wire.BatchBuilder
	bb.Reset(nil, 0, firstSeq)
	for _, p := range recs {
		bb.Add(p)
	}
	return bb.Finish()
}

// checkSummed checks that frame holds recs and hash/crc32's CRC of its data.
func checkSummed(t *testing.T, frame []byte, recs [][]byte) {
	t.Helper()
	if got, want := binary.BigEndian.Uint32(frame[26:]), crc32.Checksum(frame[wire.BatchHeaderSize:], castagnoli); got != want {
		t.Fatalf("CRC %08x, hash/crc32 %08x", got, want)
	}
	it := recordsOf(t, frame)
	for i, want := range recs {
		raw, ok := it.Next()
		if p, plain := wire.PlainPayload(raw); !ok || !plain || !bytes.Equal(p, want) {
			t.Fatalf("record %d of %d differs", i, len(recs))
		}
	}
}

// TestBatchBuilderAddRef: a frame built with AddRef (payloads referenced,
// not copied), flattened with AppendFlat, is byte for byte the frame Add
// builds of the same records, in any mix of the two, with Sum and Grow in
// between; Size counts the referenced bytes; the splices point into the
// payloads themselves; TakeSplices hands them over and leaves the next
// frame without any; a frame with splices is never compressed.
func TestBatchBuilderAddRef(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s2, err := wire.NewCompressor(wire.CodecS2, wire.LevelDefault)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	var bb wire.BatchBuilder
	var spare []wire.Splice
	compressedAny := false
	for round := range 300 {
		var recs [][]byte
		refs := 0
		bb.Reset(bb.Bytes(), 0, 7)
		for range 1 + rng.IntN(40) {
			p := make([]byte, rng.IntN(3000))
			if round%2 == 0 { // odd rounds' payloads compress
				for i := range p {
					p[i] = byte(rng.Uint32())
				}
			}
			if rng.IntN(4) == 0 {
				bb.Grow(rng.IntN(8000), 1<<20)
			}
			if round%3 != 0 && rng.IntN(2) == 0 { // every third round without
				bb.AddRef(p)
				refs++
				if s := bb.Splices(); len(p) > 0 && &s[len(s)-1].Data[0] != &p[0] {
					t.Fatalf("round %d: the splice does not refer to the payload", round)
				}
			} else {
				bb.Add(p)
			}
			recs = append(recs, p)
			if rng.IntN(3) == 0 {
				bb.Sum()
			}
		}
		want := addAll(7, recs)
		if got := bb.Size(); got != len(want) {
			t.Fatalf("round %d: Size %d, the frame has %d bytes", round, got, len(want))
		}
		frame, compressed := bb.FinishCompressed(s2, nil)
		if compressed && refs > 0 {
			t.Fatalf("round %d: a frame with splices was compressed", round)
		}
		if compressed {
			compressedAny = true
			continue
		}
		splices := bb.TakeSplices(spare)
		if len(splices) != refs {
			t.Fatalf("round %d: %d splices for %d AddRefs", round, len(splices), refs)
		}
		if got := wire.AppendFlat(nil, frame, splices); !bytes.Equal(got, want) {
			t.Fatalf("round %d: %d records, %d referenced: a different frame", round, len(recs), refs)
		}
		checkSummed(t, wire.AppendFlat(nil, frame, splices), recs)
		if len(bb.Splices()) != 0 {
			t.Fatalf("round %d: splices left after TakeSplices", round)
		}
		clear(splices)
		spare = splices[:0]
	}
	if !compressedAny {
		t.Fatal("no frame without splices was compressed: the check above proved nothing")
	}
}

// TestRecordIterRest: after each record Next returns, Rest is the block of
// the records after it, which a new iterator over that many reads as the
// same records; after a failure it is nil.
func TestRecordIterRest(t *testing.T) {
	var bb wire.BatchBuilder
	bb.Reset(nil, 0, 1)
	payloads := [][]byte{[]byte("a"), bytes.Repeat([]byte{'b'}, 200), {}, []byte("dd")}
	for i, p := range payloads {
		if i == 1 {
			bb.AddRecord(p, []byte("key"), []wire.Header{{Key: "h", Value: []byte("v")}}, time.Unix(1, 2))
			continue
		}
		bb.Add(p)
	}
	b, err := wire.DecodeBatch(bb.Finish())
	if err != nil {
		t.Fatal(err)
	}
	it, _ := b.Records()
	if !bytes.Equal(it.Rest(), b.Data) {
		t.Fatal("Rest before the first Next is not the whole block")
	}
	var want [][]byte
	for raw, ok := it.Next(); ok; raw, ok = it.Next() {
		want = append(want, raw)
	}
	for n := range len(payloads) + 1 {
		it, _ := b.Records()
		for range n {
			it.Next()
		}
		if n == len(payloads) {
			if len(it.Rest()) != 0 {
				t.Fatalf("after every record Rest holds %d bytes", len(it.Rest()))
			}
			continue
		}
		ri := wire.NewRecordIter(it.Rest(), uint32(len(payloads)-n))
		for k := n; k < len(payloads); k++ {
			raw, ok := ri.Next()
			if !ok || !bytes.Equal(raw, want[k]) {
				t.Fatalf("after %d records: record %d of Rest differs", n, k)
			}
		}
		if _, ok := ri.Next(); ok || ri.Err() != nil {
			t.Fatalf("after %d records: Rest holds more, or is malformed: %v", n, ri.Err())
		}
	}
	it = wire.NewRecordIter([]byte{1, 0, 'a'}, 2)
	for _, ok := it.Next(); ok; _, ok = it.Next() {
	}
	if it.Err() == nil || it.Rest() != nil {
		t.Fatalf("after a failure: Err %v, Rest %q", it.Err(), it.Rest())
	}
}
