package wire_test

import (
	"testing"

	"github.com/inflightmq/inflight/wire"
)

// benchData is the records of a batch to compress: 1000 records of 100
// bytes, realistic JSON-like lines or random bytes.
var benchData = []struct {
	name string
	recs func() [][]byte
}{
	{"json", func() [][]byte { return jsonRecords(42, 1000, 100) }},
	{"random", func() [][]byte { return randomRecords(42, 1000, 100) }},
}

// BenchmarkCompress measures FinishCompressed on a filled builder, as a
// producer pays it per batch. The ratio is that of what goes on the wire:
// raw block / frame data, so 1 when compression did not pay and the batch
// went uncompressed (random data).
func BenchmarkCompress(b *testing.B) {
	for _, data := range benchData {
		recs := data.recs()
		for _, cc := range codecCases {
			b.Run(data.name+"/"+cc.name, func(b *testing.B) {
				c := newCompressor(b, cc.codec, cc.level)
				bb := filled(1, recs)
				raw := bb.Size() - wire.BatchHeaderSize
				dst := make([]byte, 0, 2*raw)
				var frame []byte
				step := func() { frame, _ = bb.FinishCompressed(c, dst) }
				warmup(step) // the encoder allocates its tables on first use
				b.SetBytes(int64(raw))
				b.ReportAllocs()
				for b.Loop() {
					step()
				}
				b.ReportMetric(float64(raw)/float64(len(frame)-wire.BatchHeaderSize), "ratio")
			})
		}
	}
}

// BenchmarkDecompress measures DecodeBatch, Decompress into a reused
// buffer and reading every record, as a broker pays it per batch. The
// frames are compressed even when that does not pay (Compressor.Append
// directly), so that random data measures the decoder on incompressible
// blocks; the ratio is raw block / compressed block.
func BenchmarkDecompress(b *testing.B) {
	d := newDecompressor(b, wire.DefaultMaxFrameSize)
	for _, data := range benchData {
		recs := data.recs()
		for _, cc := range codecCases {
			b.Run(data.name+"/"+cc.name, func(b *testing.B) {
				c := newCompressor(b, cc.codec, cc.level)
				raw := buildBatch(1, recs...)[wire.BatchHeaderSize:]
				block := c.Append(nil, raw)
				frame := rawBatch(1, uint32(len(recs)), cc.codec, uint32(len(raw)), block)
				out := make([]byte, 0, len(raw))
				step := func() { out, _ = readBatch(b, d, frame, out) }
				warmup(step) // every block decoder allocates its buffers on first use
				b.SetBytes(int64(len(raw)))
				b.ReportAllocs()
				for b.Loop() {
					step()
				}
				b.ReportMetric(float64(len(raw))/float64(len(block)), "ratio")
			})
		}
	}
}
