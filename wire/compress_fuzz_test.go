package wire

// These tests live inside the package to build frames with putBatchHeader,
// the code FinishCompressed uses, around data of their choosing.

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/inflightmq/inflight/wire/crc32c"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// fuzzLimit is the decompression limit of the fuzz targets: small enough
// to keep executions fast, large enough for the seeds.
const fuzzLimit = 1 << 20

// batchFrame builds a BATCH frame of count records from sequence 1 around
// data, with a correct CRC.
func batchFrame(codec Codec, count, rawLen int, data []byte) []byte {
	f := make([]byte, BatchHeaderSize, BatchHeaderSize+len(data))
	f = append(f, data...)
	putBatchHeader(f, len(f), 0, 1, count, codec, rawLen, crc32c.Checksum(data))
	return f
}

// seedBlock is a records block of 50 similar log lines, which every codec
// compresses.
func seedBlock() []byte {
	var bb BatchBuilder
	bb.Reset(nil, 0, 1)
	for i := range 50 {
		bb.Add([]byte("level=info msg=\"request served\" path=/v1/items/" + string(rune('a'+i%26)) + " status=200"))
	}
	return bb.Finish()[BatchHeaderSize:]
}

// seedCompressors returns a compressor for every codec and level.
func seedCompressors(tb testing.TB) []*Compressor {
	tb.Helper()
	var cs []*Compressor
	for _, c := range []Codec{CodecNone, CodecZstd, CodecS2, CodecSnappy} {
		for l := LevelFastest; l <= LevelBetter; l++ {
			cp, err := NewCompressor(c, l)
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(cp.Close)
			cs = append(cs, cp)
		}
	}
	return cs
}

// FuzzDecompress decompresses arbitrary data under a BATCH header with a
// correct CRC, so that only the decompressor stands between the data and
// the records. It must never panic nor produce more than its limit, and
// when it succeeds the output is exactly rawLen bytes, the codec library's
// own decoding of the data.
func FuzzDecompress(f *testing.F) {
	d, err := NewDecompressor(fuzzLimit)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(d.Close)
	ref, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(fuzzLimit), zstd.WithDecoderConcurrency(1))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(ref.Close)

	raw := seedBlock()
	for _, cp := range seedCompressors(f) {
		data := cp.Append(nil, raw)
		f.Add(byte(cp.Codec()), uint32(len(raw)), data)
		f.Add(byte(cp.Codec()), uint32(len(raw)-1), data)             // header one short
		f.Add(byte(cp.Codec()), uint32(len(raw)), data[:len(data)-1]) // data cut
	}
	// Small bombs: 4 MiB of zeros claiming 1000 bytes, or honestly over
	// the limit. (Seeds stay small: the fuzzer minimizes every new input,
	// slowly when it is large. Snappy needs 50 KB for 1 MiB of zeros.)
	zeros := make([]byte, 4*fuzzLimit)
	f.Add(byte(CodecZstd), uint32(1000), zstdEncode(f, zeros))
	f.Add(byte(CodecS2), uint32(1000), s2.Encode(nil, zeros))
	f.Add(byte(CodecS2), uint32(len(zeros)), s2.Encode(nil, zeros))
	f.Add(byte(CodecSnappy), uint32(1000), s2.EncodeSnappy(nil, zeros[:4000]))
	f.Add(byte(CodecZstd), uint32(5), []byte{})
	f.Add(byte(CodecS2), uint32(5), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x0f})

	f.Fuzz(func(t *testing.T, codec byte, rawLen uint32, data []byte) {
		c := Codec(codec % 4)
		b, err := DecodeBatch(batchFrame(c, 1, int(rawLen), data))
		if err != nil {
			// With a correct CRC, only the lengths can be wrong.
			if !errors.Is(err, ErrMalformed) || (rawLen != 0 && (c != CodecNone || int(rawLen) == len(data))) {
				t.Fatalf("DecodeBatch(%v, rawLen %d, %d bytes): %v", c, rawLen, len(data), err)
			}
			return
		}
		nb, out, err := b.Decompress(d, nil)
		if len(out) > fuzzLimit || (c != CodecNone && len(nb.Data) > fuzzLimit) {
			t.Fatalf("Decompress returned %d bytes, limit %d", max(len(out), len(nb.Data)), fuzzLimit)
		}
		if err != nil {
			switch {
			case c == CodecNone:
				t.Fatalf("Decompress of a decoded none batch: %v", err)
			case rawLen > fuzzLimit && !errors.Is(err, ErrFrameTooLarge):
				t.Fatalf("Decompress claiming %d bytes: %v, want ErrFrameTooLarge", rawLen, err)
			case rawLen <= fuzzLimit && !errors.Is(err, ErrMalformed):
				t.Fatalf("Decompress: %v, want ErrMalformed", err)
			}
			return
		}
		if c != CodecNone && rawLen > fuzzLimit {
			t.Fatalf("Decompress produced %d bytes, limit %d", rawLen, fuzzLimit)
		}
		if nb.Codec != CodecNone || len(nb.Data) != int(rawLen) || nb.Count != 1 || nb.FirstSeq != 1 {
			t.Fatalf("decompressed batch %v, %d bytes, count %d, first %d; rawLen %d",
				nb.Codec, len(nb.Data), nb.Count, nb.FirstSeq, rawLen)
		}

		var want []byte
		switch c {
		case CodecNone:
			want = data
		case CodecS2, CodecSnappy:
			want, err = s2.Decode(nil, data)
		case CodecZstd:
			want, err = ref.DecodeAll(data, nil)
		}
		if err != nil || !bytes.Equal(nb.Data, want) {
			t.Fatalf("%v: Decompress gave %d bytes, the library %d bytes, %v", c, len(nb.Data), len(want), err)
		}

		// The records may be anything, but reading them must not fail
		// before the iterator.
		it, err := nb.Records()
		if err != nil {
			t.Fatalf("Records of a decompressed batch: %v", err)
		}
		for _, ok := it.Next(); ok; _, ok = it.Next() {
		}
	})
}

// zstdEncode compresses src the way a Compressor does.
func zstdEncode(tb testing.TB, src []byte) []byte {
	tb.Helper()
	cp, err := NewCompressor(CodecZstd, LevelDefault)
	if err != nil {
		tb.Fatal(err)
	}
	defer cp.Close()
	return cp.Append(nil, src)
}

// FuzzCompressRoundTrip builds a batch of arbitrary records (in is cut
// into records, each a length byte and that many bytes) with every codec
// at one level (level%3), and reads it back.
func FuzzCompressRoundTrip(f *testing.F) {
	d, err := NewDecompressor(DefaultMaxFrameSize)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(d.Close)
	compressors := seedCompressors(f)

	rnd := make([]byte, 4000)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(rnd)
	for l := range byte(3) {
		f.Add(l, []byte{})
		f.Add(l, []byte{0})
		f.Add(l, []byte{3, 'a', 'b', 'c', 0, 200})
		f.Add(l, bytes.Repeat([]byte("\x20hello hello hello hello hello wor"), 40))
		f.Add(l, rnd)
		f.Add(l, append(bytes.Repeat([]byte{255}, 300), rnd...))
	}

	var buf, dst, out []byte
	f.Fuzz(func(t *testing.T, level byte, in []byte) {
		var recs [][]byte
		for len(in) > 0 {
			n := min(int(in[0]), len(in)-1)
			recs = append(recs, in[1:1+n])
			in = in[1+n:]
		}
		if len(recs) == 0 {
			recs = append(recs, nil)
		}

		var bb BatchBuilder
		for _, cp := range compressors {
			if cp.level != Level(level%3) {
				continue
			}
			bb.Reset(buf, 0, 1)
			for _, r := range recs {
				bb.Add(r)
			}
			rawLen := bb.Size() - BatchHeaderSize
			frame, compressed := bb.FinishCompressed(cp, dst)
			buf = bb.buf[:0]
			if compressed {
				dst = frame[:0]
			}

			b, err := DecodeBatch(frame)
			if err != nil {
				t.Fatalf("%v/%v: DecodeBatch: %v", cp.Codec(), cp.level, err)
			}
			switch {
			case compressed && (cp.Codec() == CodecNone || rawLen < minCompress):
				t.Fatalf("%v/%v: compressed a %d-byte block", cp.Codec(), cp.level, rawLen)
			case compressed && (b.Codec != cp.Codec() || len(b.Data) > rawLen-rawLen/8):
				t.Fatalf("%v/%v: compressed frame says %v, %d of %d bytes", cp.Codec(), cp.level, b.Codec, len(b.Data), rawLen)
			case !compressed && b.Codec != CodecNone:
				t.Fatalf("%v/%v: uncompressed frame says %v", cp.Codec(), cp.level, b.Codec)
			}
			if int(b.RawLen) != rawLen || int(b.Count) != len(recs) {
				t.Fatalf("%v/%v: header rawLen %d count %d, want %d %d", cp.Codec(), cp.level, b.RawLen, b.Count, rawLen, len(recs))
			}

			var nb Batch
			if nb, out, err = b.Decompress(d, out); err != nil {
				t.Fatalf("%v/%v: Decompress: %v", cp.Codec(), cp.level, err)
			}
			got, err := nb.AppendRecords(nil)
			if err != nil || !slices.EqualFunc(got, recs, bytes.Equal) {
				t.Fatalf("%v/%v: %d records back of %d, %v", cp.Codec(), cp.level, len(got), len(recs), err)
			}
		}
	})
}

// TestDecompressGarbage puts garbage, with a correct CRC, where compressed
// data belongs: DecodeBatch accepts it, Decompress must refuse it.
func TestDecompressGarbage(t *testing.T) {
	d, err := NewDecompressor(fuzzLimit)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	raw := seedBlock()
	zstdBlock := zstdEncode(t, raw)
	s2Block := s2.Encode(nil, raw)
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		return p
	}

	for _, c := range []Codec{CodecZstd, CodecS2, CodecSnappy} {
		for name, data := range map[string][]byte{
			"random 1":               random(1),
			"random 100":             random(100),
			"random 64 KiB":          random(64 << 10),
			"zstd magic then junk":   append([]byte{0x28, 0xb5, 0x2f, 0xfd}, random(200)...),
			"s2 length then junk":    append([]byte{byte(len(raw)), byte(len(raw) >> 7)}, random(200)...),
			"zero bytes":             make([]byte, 300),
			"0xff bytes":             bytes.Repeat([]byte{0xff}, 300),
			"zstd block cut":         zstdBlock[:len(zstdBlock)-3],
			"s2 block cut":           s2Block[:len(s2Block)-3],
			"zstd block with a tail": append(bytes.Clone(zstdBlock), 0),
			"s2 block with a tail":   append(bytes.Clone(s2Block), 0),
		} {
			frame := batchFrame(c, 50, len(raw), data)
			b, err := DecodeBatch(frame)
			if err != nil {
				t.Fatalf("%v/%s: DecodeBatch: %v", c, name, err)
			}
			nb, out, err := b.Decompress(d, nil)
			if !errors.Is(err, ErrMalformed) || len(out) != 0 || nb.Data != nil {
				t.Errorf("%v/%s: Decompress = %d bytes, %v; want ErrMalformed", c, name, len(out), err)
			}
		}
	}
}
