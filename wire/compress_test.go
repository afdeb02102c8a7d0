package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"

	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/wire"
)

// codecCase is one codec at one level.
type codecCase struct {
	name  string
	codec wire.Codec
	level wire.Level
}

// codecCases lists every codec at every level that maps to distinct
// settings (s2's fastest is its default; snappy has no levels).
var codecCases = []codecCase{
	{"none", wire.CodecNone, wire.LevelDefault},
	{"zstd-fastest", wire.CodecZstd, wire.LevelFastest},
	{"zstd-default", wire.CodecZstd, wire.LevelDefault},
	{"zstd-better", wire.CodecZstd, wire.LevelBetter},
	{"s2-default", wire.CodecS2, wire.LevelDefault},
	{"s2-better", wire.CodecS2, wire.LevelBetter},
	{"snappy", wire.CodecSnappy, wire.LevelDefault},
}

func newCompressor(tb testing.TB, c wire.Codec, l wire.Level) *wire.Compressor {
	tb.Helper()
	cp, err := wire.NewCompressor(c, l)
	if err != nil {
		tb.Fatalf("NewCompressor(%v, %v): %v", c, l, err)
	}
	tb.Cleanup(cp.Close)
	return cp
}

func newDecompressor(tb testing.TB, limit int) *wire.Decompressor {
	tb.Helper()
	d, err := wire.NewDecompressor(limit)
	if err != nil {
		tb.Fatalf("NewDecompressor(%d): %v", limit, err)
	}
	tb.Cleanup(d.Close)
	return d
}

// newRand returns a deterministic source, so a failure reproduces.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

// randomBytes returns n incompressible bytes.
func randomBytes(seed uint64, n int) []byte {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	p := make([]byte, n)
	_, _ = rand.NewChaCha8(key).Read(p)
	return p
}

// randomRecords returns n records of size random bytes each.
func randomRecords(seed uint64, n, size int) [][]byte {
	data := randomBytes(seed, n*size)
	recs := make([][]byte, n)
	for i := range recs {
		recs[i] = data[i*size : (i+1)*size : (i+1)*size]
	}
	return recs
}

// jsonRecord appends a JSON-like log line of exactly size bytes (cut or
// padded with spaces) to dst: realistic, semi-compressible data whose
// numbers vary from record to record.
func jsonRecord(dst []byte, rng *rand.Rand, size int) []byte {
	statuses := [...]string{"ok", "retry", "failed", "pending"}
	n := len(dst)
	dst = fmt.Appendf(dst, `{"id":%d,"user":"u%06d","amount":%d.%02d,"status":"%s","lat_ms":%d,"region":"eu-west-%d"}`,
		rng.Uint64N(1<<40), rng.IntN(1e6), rng.IntN(10000), rng.IntN(100),
		statuses[rng.IntN(len(statuses))], rng.IntN(5000), rng.IntN(3)+1)
	if len(dst)-n > size {
		return dst[:n+size]
	}
	for len(dst)-n < size {
		dst = append(dst, ' ')
	}
	return dst
}

// jsonRecords returns n JSON-like records of size bytes.
func jsonRecords(seed uint64, n, size int) [][]byte {
	rng := newRand(seed)
	recs := make([][]byte, n)
	for i := range recs {
		recs[i] = jsonRecord(nil, rng, size)
	}
	return recs
}

// repeatedRecords returns n copies of the same line: highly compressible.
func repeatedRecords(n int) [][]byte {
	line := []byte("2026-01-02T03:04:05Z INFO request served method=GET path=/api/v1/items status=200")
	recs := make([][]byte, n)
	for i := range recs {
		recs[i] = line
	}
	return recs
}

// blockOf returns JSON-like records whose records block (lengths
// included) is exactly size bytes.
func blockOf(seed uint64, size int) [][]byte {
	rng := newRand(seed)
	var recs [][]byte
	left := size
	for left > 0 {
		n := min(200+rng.IntN(800), left-wire.RecordOverhead(left))
		for n+wire.RecordOverhead(n) > left { // an empty record fills the last byte
			n--
		}
		recs = append(recs, jsonRecord(nil, rng, n))
		left -= n + wire.RecordOverhead(n)
	}
	return recs
}

// blockLen is the size of the records block of recs.
func blockLen(recs [][]byte) int {
	var n int
	for _, r := range recs {
		n += wire.RecordOverhead(len(r)) + len(r)
	}
	return n
}

// build builds a batch of recs from firstSeq with a fresh BatchBuilder and
// compresses it with c into dst.
func build(c *wire.Compressor, dst []byte, firstSeq uint64, recs [][]byte) (frame, raw []byte, compressed bool) {
	bb := filled(firstSeq, recs)
	frame, compressed = bb.FinishCompressed(c, dst)
	raw = bytes.Clone(bb.Finish()[wire.BatchHeaderSize:]) // Finish rewrites only the builder's header
	return frame, raw, compressed
}

func TestCompressionRoundTrip(t *testing.T) {
	payloads := []struct {
		name         string
		recs         [][]byte
		compressible bool // a real codec must compress it
	}{
		{"one empty record", [][]byte{{}}, false},
		{"one 1-byte record", [][]byte{{'x'}}, false},
		{"100 random 100-byte records", randomRecords(1, 100, 100), false},
		{"1000 repeated lines", repeatedRecords(1000), true},
		{"1 MiB block", blockOf(2, 1<<20), true},
		{"one random 64 KiB record", [][]byte{randomBytes(3, 64<<10)}, false},
	}
	if n := blockLen(payloads[4].recs); n != 1<<20 {
		t.Fatalf("1 MiB payload has a %d-byte block", n)
	}
	d := newDecompressor(t, wire.DefaultMaxFrameSize)

	for _, cc := range codecCases {
		c := newCompressor(t, cc.codec, cc.level)
		if c.Codec() != cc.codec {
			t.Fatalf("%s: Codec() = %v", cc.name, c.Codec())
		}
		for _, p := range payloads {
			t.Run(cc.name+"/"+p.name, func(t *testing.T) {
				const firstSeq = 1000
				dst := make([]byte, 0, 64) // too small: FinishCompressed grows it
				frame, raw, compressed := build(c, dst, firstSeq, p.recs)
				if len(raw) != blockLen(p.recs) {
					t.Fatalf("raw block %d bytes, want %d", len(raw), blockLen(p.recs))
				}
				want := p.compressible && cc.codec != wire.CodecNone
				if compressed != want {
					t.Fatalf("compressed = %v, want %v (frame %d bytes, raw %d)", compressed, want, len(frame), len(raw))
				}

				b, err := wire.DecodeBatch(frame)
				if err != nil {
					t.Fatalf("DecodeBatch: %v", err)
				}
				wantCodec := wire.CodecNone
				if compressed {
					wantCodec = c.Codec()
					if len(b.Data) > len(raw)-len(raw)/8 {
						t.Errorf("compressed block is %d bytes, more than 7/8 of %d", len(b.Data), len(raw))
					}
				}
				if b.Codec != wantCodec || b.FirstSeq != firstSeq || int(b.Count) != len(p.recs) || int(b.RawLen) != len(raw) {
					t.Fatalf("header %v/%d/%d/%d, want %v/%d/%d/%d", b.Codec, b.FirstSeq, b.Count, b.RawLen,
						wantCodec, firstSeq, len(p.recs), len(raw))
				}

				nb, out, err := b.Decompress(d, nil)
				if err != nil {
					t.Fatalf("Decompress: %v", err)
				}
				if nb.Codec != wire.CodecNone || nb.FirstSeq != b.FirstSeq || nb.Count != b.Count ||
					nb.RawLen != b.RawLen || nb.CRC != b.CRC {
					t.Errorf("decompressed header %v/%d/%d/%d/%08x", nb.Codec, nb.FirstSeq, nb.Count, nb.RawLen, nb.CRC)
				}
				if !bytes.Equal(nb.Data, raw) || (compressed && !bytes.Equal(out, raw)) {
					t.Fatal("decompressed block differs from the raw block")
				}
				got, err := nb.AppendRecords(nil)
				if err != nil {
					t.Fatalf("AppendRecords: %v", err)
				}
				if len(got) != len(p.recs) || !slices.EqualFunc(got, p.recs, bytes.Equal) {
					t.Fatalf("got %d records back, want %d, or they differ", len(got), len(p.recs))
				}
			})
		}
	}
}

// TestFinishCompressedBuffers checks where FinishCompressed builds: in dst
// when it compresses, in the builder's buffer (as Finish) when it does not.
func TestFinishCompressedBuffers(t *testing.T) {
	c := newCompressor(t, wire.CodecS2, wire.LevelDefault)
	buf := make([]byte, 0, 1<<20)
	dst := make([]byte, 0, 1<<20)
	var bb wire.BatchBuilder

	fill(&bb, buf, 1, repeatedRecords(100))
	frame, ok := bb.FinishCompressed(c, dst)
	if !ok || &frame[0] != &dst[:1][0] {
		t.Errorf("compressible batch: compressed %v, built in dst %v", ok, ok && &frame[0] == &dst[:1][0])
	}

	rnd := randomBytes(4, 1000)
	bb.Reset(buf, 0, 1)
	bb.Add(rnd)
	frame, ok = bb.FinishCompressed(c, dst)
	if ok || &frame[0] != &buf[:1][0] {
		t.Error("incompressible batch: not returned uncompressed in the builder's buffer")
	}
	if want := buildBatch(1, rnd); !bytes.Equal(frame, want) {
		t.Error("uncompressed FinishCompressed differs from Finish")
	}

	// A nil compressor, an empty builder and a block under the threshold
	// are all sent as is.
	bb.Reset(buf, 0, 1)
	bb.Add(bytes.Repeat([]byte("a"), 40))
	if _, ok := bb.FinishCompressed(nil, dst); ok {
		t.Error("nil compressor compressed")
	}
	if _, ok := bb.FinishCompressed(c, dst); ok {
		t.Error("a 41-byte block was compressed")
	}
	var zero wire.BatchBuilder
	if f, ok := zero.FinishCompressed(c, dst); ok || len(f) != wire.BatchHeaderSize {
		t.Errorf("zero builder: %d bytes, compressed %v", len(f), ok)
	}
}

// TestLevels checks that each level reaches its own encoder: the same
// block compresses to different bytes at each level the codec tells apart,
// and not more than 5% worse at a higher level on this data (zstd's
// default level does a little worse than its fastest here).
func TestLevels(t *testing.T) {
	raw := buildBatch(1, jsonRecords(9, 1000, 100)...)[wire.BatchHeaderSize:]
	for _, c := range []wire.Codec{wire.CodecZstd, wire.CodecS2} {
		var prev []byte
		for l := wire.LevelFastest; l <= wire.LevelBetter; l++ {
			block := newCompressor(t, c, l).Append(nil, raw)
			t.Logf("%v/%v: %d -> %d bytes", c, l, len(raw), len(block))
			same := c == wire.CodecS2 && l == wire.LevelDefault // s2's fastest is its default
			switch {
			case prev == nil:
			case same && !bytes.Equal(block, prev):
				t.Errorf("%v: %v and %v differ", c, l-1, l)
			case !same && bytes.Equal(block, prev):
				t.Errorf("%v: %v and %v compress alike", c, l-1, l)
			case len(block) > len(prev)*21/20:
				t.Errorf("%v: %v gives %d bytes, %v %d", c, l, len(block), l-1, len(prev))
			}
			prev = block
		}
	}
}

// allocated returns the bytes allocated on the heap while f runs. Tests
// that use it must not run in parallel with others.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// compressWith compresses src with c into a block of its own.
func compressWith(tb testing.TB, c wire.Codec, src []byte) []byte {
	tb.Helper()
	cp := newCompressor(tb, c, wire.LevelDefault)
	return cp.Append(nil, src)
}

// zstdStream compresses src with the streaming zstd encoder, which does
// not write the content size in the frame header, and a small window, so a
// decoder has to decode to find the size out.
func zstdStream(tb testing.TB, src []byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf, zstd.WithWindowSize(256<<10), zstd.WithEncoderConcurrency(1))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := w.Write(src); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	var h zstd.Header
	if err := h.Decode(buf.Bytes()); err != nil || h.HasFCS {
		tb.Fatalf("stream frame header %+v, %v: want no content size", h, err)
	}
	return buf.Bytes()
}

// withZstdFCS returns a copy of the zstd frame f, which must have neither a
// content size nor a dictionary id nor a single segment, with a forged
// 4-byte content size of n.
func withZstdFCS(f []byte, n uint32) []byte {
	const fhd, wd = 4, 5 // after the 4-byte magic: the descriptor, the window byte
	out := append(bytes.Clone(f[:wd+1]), binary.LittleEndian.AppendUint32(nil, n)...)
	out[fhd] |= 2 << 6 // Frame_Content_Size_Flag 2: four bytes
	return append(out, f[wd+1:]...)
}

// withS2Len returns a copy of the s2/snappy block b with its length header
// replaced by n.
func withS2Len(b []byte, n int) []byte {
	_, k := binary.Uvarint(b)
	return append(binary.AppendUvarint(nil, uint64(n)), b[k:]...)
}

// allocBound is the most a Decompress with an empty dst may allocate for
// a block whose header claims rawLen bytes, decoded with the given limit.
//
//   - A claim over the limit is refused on sight: only the error allocates.
//   - s2 and snappy decode into a buffer of rawLen bytes and never past it.
//   - zstd decodes into a buffer of rawLen bytes too, but klauspost/compress
//     (v1.20.4) checks its output against the buffer's capacity only after
//     appending a whole block (up to 128 KiB), and that append reallocates
//     with Go's growth of 1.25x: a frame that lies about its size, with or
//     without a content size, costs up to rawLen + 1.25*(rawLen+128 KiB),
//     plus the block decoder's own buffers (its RLE buffer is 128 KiB) the
//     first time it is used. Measured with a 1 MiB limit: 2.54 MB for a
//     frame without content size, 2.37 MB with a forged one. That is still
//     bounded by the limit, not by what the bomb would expand to (64 MiB).
func allocBound(c wire.Codec, rawLen uint32, limit int) uint64 {
	const slack = 64 << 10 // errors and small buffers
	switch {
	case int64(rawLen) > int64(limit):
		return slack
	case c == wire.CodecZstd:
		return uint64(rawLen) + 5*(uint64(rawLen)+128<<10)/4 + 256<<10
	}
	return uint64(rawLen) + slack
}

// allocBoundRace is allocBound, doubled under -race for slices.Grow's
// double allocation and the pools' dropped items.
func allocBoundRace(c wire.Codec, rawLen uint32, limit int) uint64 {
	if testkit.RaceEnabled {
		return 2 * allocBound(c, rawLen, limit)
	}
	return allocBound(c, rawLen, limit)
}

func TestDecompressionBombRejected(t *testing.T) {
	const limit = 1 << 20
	d := newDecompressor(t, limit)
	if d.Limit() != limit {
		t.Fatalf("Limit() = %d", d.Limit())
	}
	zeros := make([]byte, 64<<20)                  // the bomb's payload, built once
	small := bytes.Repeat([]byte("abcdefgh"), 512) // an honest 4 KiB block

	type bomb struct {
		name   string
		codec  wire.Codec
		rawLen uint32 // what the header claims
		data   []byte
		want   error
	}
	var bombs []bomb
	packedZeros := make(map[wire.Codec][]byte)
	for _, c := range []wire.Codec{wire.CodecZstd, wire.CodecS2, wire.CodecSnappy} {
		packed := compressWith(t, c, zeros)
		packedZeros[c] = packed
		t.Logf("%v: 64 MiB of zeros compress to %d bytes", c, len(packed))
		bombs = append(bombs,
			// (a) The header claims more than the limit: refused on sight.
			bomb{"claims 1 GiB", c, 1 << 30, compressWith(t, c, small), wire.ErrFrameTooLarge},
			bomb{"claims 4 GiB-1", c, 1<<32 - 1, compressWith(t, c, small), wire.ErrFrameTooLarge},
			// (b) The header lies: it claims the limit, the data holds 64 MiB.
			bomb{"lies: claims the limit", c, limit, packed, wire.ErrMalformed},
			bomb{"lies: claims 1000", c, 1000, packed, wire.ErrMalformed},
			// (c) The header is honest and over the limit.
			bomb{"honest 64 MiB", c, 64 << 20, packed, wire.ErrFrameTooLarge},
			// The block is honest, the header says one byte less or more.
			bomb{"raw len one short", c, uint32(len(small)) - 1, compressWith(t, c, small), wire.ErrMalformed},
			bomb{"raw len one over", c, uint32(len(small)) + 1, compressWith(t, c, small), wire.ErrMalformed},
		)
	}
	streamed := zstdStream(t, zeros)
	bombs = append(bombs,
		bomb{"zstd without content size lies", wire.CodecZstd, limit, streamed, wire.ErrMalformed},
		bomb{"zstd without content size lies small", wire.CodecZstd, 1000, streamed, wire.ErrMalformed},
		bomb{"zstd content size lies too", wire.CodecZstd, limit, withZstdFCS(streamed, limit), wire.ErrMalformed},
		bomb{"zstd content size lies small", wire.CodecZstd, 1000, withZstdFCS(streamed, 1000), wire.ErrMalformed},
	)
	for _, c := range []wire.Codec{wire.CodecS2, wire.CodecSnappy} {
		packed := packedZeros[c]
		// The block's own length header agrees with the frame's and lies
		// too: the decoder must stop at the end of its buffer.
		bombs = append(bombs,
			bomb{"s2 length header lies too", c, limit, withS2Len(packed, limit), wire.ErrMalformed},
			bomb{"s2 length header lies small", c, 1000, withS2Len(packed, 1000), wire.ErrMalformed},
			// The block's own length header disagrees with the frame's.
			bomb{"s2.DecodedLen disagrees", c, uint32(len(small)), withS2Len(compressWith(t, c, small), len(small)+8), wire.ErrMalformed},
			bomb{"s2 length header garbage", c, 100, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, wire.ErrMalformed},
		)
	}

	for _, bm := range bombs {
		t.Run(bm.codec.String()+"/"+bm.name, func(t *testing.T) {
			frame := rawBatch(1, 1, bm.codec, bm.rawLen, bm.data)
			b, err := wire.DecodeBatch(frame)
			if err != nil {
				t.Fatalf("DecodeBatch: %v", err)
			}
			dst := make([]byte, 0, 16)
			var out []byte
			n := allocated(func() {
				_, out, err = b.Decompress(d, dst)
			})
			if !errors.Is(err, bm.want) {
				t.Errorf("Decompress: %v, want %v", err, bm.want)
			}
			if len(out) != 0 {
				t.Errorf("Decompress failed but returned %d bytes", len(out))
			}
			if bound := allocBoundRace(bm.codec, bm.rawLen, limit); n >= bound {
				t.Errorf("Decompress allocated %d bytes, want < %d", n, bound)
			}
			t.Logf("allocated %d bytes: %v", n, err)
		})
	}

	// The refusal on the header allocates only the error (a handful of
	// small objects, more under -race).
	frame := rawBatch(1, 1, wire.CodecZstd, 1<<30, compressWith(t, wire.CodecZstd, small))
	b, err := wire.DecodeBatch(frame)
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(10, func() {
		if _, _, err := b.Decompress(d, nil); !errors.Is(err, wire.ErrFrameTooLarge) {
			t.Fatal(err)
		}
	})
	if allocs > 10 {
		t.Errorf("refusing a 1 GiB claim: %v allocs, want only the error's", allocs)
	}
}

func TestCompressedCorruption(t *testing.T) {
	d := newDecompressor(t, wire.DefaultMaxFrameSize)
	recs := jsonRecords(5, 100, 100)
	for _, cc := range codecCases[1:] {
		t.Run(cc.name, func(t *testing.T) {
			frame, _, ok := build(newCompressor(t, cc.codec, cc.level), nil, 1, recs)
			if !ok {
				t.Fatal("not compressed")
			}
			for _, i := range []int{wire.BatchHeaderSize, (wire.BatchHeaderSize + len(frame)) / 2, len(frame) - 1} {
				bad := bytes.Clone(frame)
				bad[i] ^= 0x10
				if _, err := wire.DecodeBatch(bad); !errors.Is(err, wire.ErrChecksum) {
					t.Errorf("byte %d of %d flipped: %v, want ErrChecksum", i, len(frame), err)
				}
			}

			// With the CRC fixed up, damage reaches the decoder, which must
			// refuse it. (Data damaged in a literal may decode to other
			// bytes of the right size: only the CRC catches that.)
			raw := int(binary.BigEndian.Uint32(frame[22:]))
			data := frame[wire.BatchHeaderSize:]
			for name, bad := range map[string][]byte{
				"truncated":     data[:len(data)/2],
				"last byte cut": data[:len(data)-1],
				"empty":         {},
				"random":        randomBytes(6, len(data)),
				"doubled":       append(bytes.Clone(data), data...),
			} {
				b, err := wire.DecodeBatch(rawBatch(1, uint32(len(recs)), cc.codec, uint32(raw), bad))
				if err != nil {
					t.Fatalf("%s: DecodeBatch: %v", name, err)
				}
				if _, _, err := b.Decompress(d, nil); !errors.Is(err, wire.ErrMalformed) {
					t.Errorf("%s: Decompress: %v, want ErrMalformed", name, err)
				}
			}
		})
	}
}

func TestCompressorErrors(t *testing.T) {
	for _, tc := range []struct {
		c wire.Codec
		l wire.Level
	}{
		{wire.Codec(4), wire.LevelDefault},
		{wire.Codec(9), wire.LevelDefault},
		{wire.CodecZstd, wire.Level(7)},
		{wire.CodecS2, wire.Level(3)},
		{wire.CodecNone, wire.Level(-1)},
	} {
		if c, err := wire.NewCompressor(tc.c, tc.l); !errors.Is(err, wire.ErrUnsupportedCodec) || c != nil {
			t.Errorf("NewCompressor(%v, %v) = %v, %v; want ErrUnsupportedCodec", tc.c, tc.l, c, err)
		}
	}
	for _, limit := range []int{0, -1} {
		if d, err := wire.NewDecompressor(limit); err == nil || d != nil {
			t.Errorf("NewDecompressor(%d) = %v, %v; want an error", limit, d, err)
		}
	}

	// Close is idempotent, whether or not the codec has state to release.
	for _, cc := range codecCases {
		c, err := wire.NewCompressor(cc.codec, cc.level)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.Append(nil, []byte("some data to use the encoder"))
		c.Close()
		c.Close()
	}
	d, err := wire.NewDecompressor(1 << 10)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	d.Close()

	for l, want := range map[wire.Level]string{
		wire.LevelFastest: "fastest", wire.LevelDefault: "default", wire.LevelBetter: "better",
		wire.Level(3): "Level(3)", wire.Level(-1): "Level(-1)",
	} {
		if got := l.String(); got != want {
			t.Errorf("Level(%d).String() = %q, want %q", int8(l), got, want)
		}
	}
}

func TestDecodeUnknownCodec(t *testing.T) {
	d := newDecompressor(t, 1<<10)
	if _, err := d.Decode(nil, wire.Codec(4), []byte("x"), 1); !errors.Is(err, wire.ErrUnsupportedCodec) {
		t.Errorf("Decode of codec 4: %v, want ErrUnsupportedCodec", err)
	}
	if _, err := d.Decode(nil, wire.CodecNone, []byte("xy"), 1); !errors.Is(err, wire.ErrMalformed) {
		t.Errorf("Decode of none with a wrong length: %v, want ErrMalformed", err)
	}
	src := []byte("xy")
	if out, err := d.Decode(nil, wire.CodecNone, src, 2); err != nil || string(out) != "xy" || &out[0] == &src[0] {
		t.Errorf("Decode of none: %q, %v, or not a copy", out, err)
	}
	if _, err := d.Decode(nil, wire.CodecS2, nil, -1); !errors.Is(err, wire.ErrFrameTooLarge) {
		t.Errorf("Decode of a negative size: %v, want ErrFrameTooLarge", err)
	}
}

// TestDecompressorConcurrent shares one Decompressor between goroutines
// decoding different frames; run it with -race.
func TestDecompressorConcurrent(t *testing.T) {
	d := newDecompressor(t, wire.DefaultMaxFrameSize)
	type job struct {
		frame []byte
		recs  [][]byte
	}
	var jobs []job
	for i := range 8 {
		c := []wire.Codec{wire.CodecZstd, wire.CodecS2}[i%2]
		recs := jsonRecords(uint64(100+i), 200+50*i, 100)
		frame, _, ok := build(newCompressor(t, c, wire.LevelDefault), nil, uint64(1+i), recs)
		if !ok {
			t.Fatalf("job %d not compressed", i)
		}
		jobs = append(jobs, job{frame, recs})
	}
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			var dst []byte
			for range 50 {
				b, err := wire.DecodeBatch(j.frame)
				if err != nil {
					t.Errorf("job %d: DecodeBatch: %v", i, err)
					return
				}
				var nb wire.Batch
				nb, dst, err = b.Decompress(d, dst)
				if err != nil {
					t.Errorf("job %d: Decompress: %v", i, err)
					return
				}
				got, err := nb.AppendRecords(nil)
				if err != nil || !slices.EqualFunc(got, j.recs, bytes.Equal) {
					t.Errorf("job %d: records differ, %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// warmup runs f often enough for every zstd block decoder (one per
// GOMAXPROCS, handed out round-robin) to have allocated its buffers, which
// it keeps.
func warmup(f func()) {
	for range 2*runtime.GOMAXPROCS(0) + 2 {
		f()
	}
}

// readBatch reads frame as a broker does: DecodeBatch, Decompress with d
// into out (returned for reuse), then every record. It returns the payload
// bytes read.
func readBatch(tb testing.TB, d *wire.Decompressor, frame, out []byte) ([]byte, int) {
	b, err := wire.DecodeBatch(frame)
	if err != nil {
		tb.Fatal(err)
	}
	var nb wire.Batch
	if nb, out, err = b.Decompress(d, out); err != nil {
		tb.Fatal(err)
	}
	it, err := nb.Records()
	if err != nil {
		tb.Fatal(err)
	}
	n := 0
	for rec, ok := it.Next(); ok; rec, ok = it.Next() {
		n += len(rec)
	}
	if err := it.Err(); err != nil {
		tb.Fatal(err)
	}
	return out, n
}

// TestAllocsCompressed checks that the steady state of building,
// compressing, decoding and decompressing a batch allocates nothing once
// buffers are reused.
//
// zstd's EncodeAll and DecodeAll allocate nothing either once warm, given a
// dst with room: the encoder keeps its tables, each block decoder (one per
// GOMAXPROCS) its buffers. The only exception is rare: DecodeAll takes its
// Huffman and FSE tables from sync.Pools, which the GC empties, so the
// first decode after a GC may allocate one (about 5 KiB). Measured: 0 to 2
// allocations per 10000 decodes, which AllocsPerRun's average rounds to 0.
func TestAllocsCompressed(t *testing.T) {
	if testkit.RaceEnabled {
		t.Skip("allocation counts do not hold under -race (see testkit.RaceEnabled)")
	}
	recs := jsonRecords(7, 100, 100)
	d := newDecompressor(t, wire.DefaultMaxFrameSize)
	for _, cc := range []codecCase{
		{"s2", wire.CodecS2, wire.LevelDefault},
		{"s2-better", wire.CodecS2, wire.LevelBetter},
		{"snappy", wire.CodecSnappy, wire.LevelDefault},
		{"zstd-fastest", wire.CodecZstd, wire.LevelFastest},
		{"zstd-default", wire.CodecZstd, wire.LevelDefault},
	} {
		t.Run(cc.name, func(t *testing.T) {
			c := newCompressor(t, cc.codec, cc.level)
			var bb wire.BatchBuilder
			buf := make([]byte, 0, 16<<10)
			dst := make([]byte, 0, 16<<10)
			var frame []byte
			build := func() {
				fill(&bb, buf, 1, recs)
				var ok bool
				if frame, ok = bb.FinishCompressed(c, dst); !ok {
					t.Fatal("not compressed")
				}
				dst = frame[:0]
			}
			warmup(build)
			if allocs := testing.AllocsPerRun(100, build); allocs != 0 {
				t.Errorf("build: %v allocs per batch, want 0", allocs)
			}

			out := make([]byte, 0, 16<<10)
			decode := func() { out, _ = readBatch(t, d, frame, out) }
			warmup(decode)
			if allocs := testing.AllocsPerRun(100, decode); allocs != 0 {
				t.Errorf("decode: %v allocs per batch, want 0", allocs)
			}
		})
	}
}

// TestAllocsIncompressible checks that a batch that does not compress
// costs no allocation either, given a dst with room for the worst case.
func TestAllocsIncompressible(t *testing.T) {
	if testkit.RaceEnabled {
		t.Skip("allocation counts do not hold under -race (see testkit.RaceEnabled)")
	}
	recs := randomRecords(8, 100, 100)
	for _, cc := range []codecCase{
		{"s2", wire.CodecS2, wire.LevelDefault},
		{"zstd-fastest", wire.CodecZstd, wire.LevelFastest},
	} {
		t.Run(cc.name, func(t *testing.T) {
			c := newCompressor(t, cc.codec, cc.level)
			var bb wire.BatchBuilder
			buf := make([]byte, 0, 16<<10)
			dst := make([]byte, 0, wire.BatchHeaderSize+s2.MaxEncodedLen(16<<10))
			run := func() {
				fill(&bb, buf, 1, recs)
				if _, ok := bb.FinishCompressed(c, dst); ok {
					t.Fatal("random data compressed")
				}
			}
			warmup(run)
			if allocs := testing.AllocsPerRun(100, run); allocs != 0 {
				t.Errorf("%v allocs per batch, want 0", allocs)
			}
		})
	}
}
