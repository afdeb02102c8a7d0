package wire

import (
	"encoding/binary"
	"iter"
	"math/bits"
	"time"

	"github.com/inflightmq/inflight/wire/crc32c"
)

// RecordOverhead returns the bytes a record costs in a batch besides its
// payload and metadata, which take n bytes (len(payload) plus what CheckMeta
// returns): its uvarint length and its flags byte. Callers add
// RecordOverhead(n) + n to BatchBuilder.Size to check a frame limit before
// AddRecord. Negative sizes count as zero.
func RecordOverhead(n int) int {
	return uvarintLen(uint64(max(n, 0))) + 1
}

// uvarintLen is the size of the shortest uvarint encoding of x.
func uvarintLen(x uint64) int {
	return (bits.Len64(x|1) + 6) / 7
}

// BatchBuilder builds a CodecNone BATCH frame in a caller-supplied buffer,
// without allocating once the buffer is large enough. It is not safe for
// concurrent use.
//
//	var bb BatchBuilder
//	bb.Reset(buf, topic, firstSeq)
//	for ... { if bb.Size()+RecordOverhead(n)+n > limit { break }; bb.AddRecord(p, key, headers, t) }
//	frame := bb.Finish()
//	... write frame ...
//	bb.Reset(frame, topic, nextSeq) // reuses frame's memory
//
// The zero value behaves as if Reset(nil, 0, 0) had been called.
type BatchBuilder struct {
	buf      []byte
	topic    uint32
	firstSeq uint64
	count    int
	// splices are the payloads AddRef referenced, in order, and spliced
	// their bytes: the frame is buf with each inserted at its At.
	splices []Splice
	spliced int
	// sum is the CRC-32C of the records up to summed (buf[BatchHeaderSize:
	// summed], see Sum); summed 0 (Reset): nothing summed. While len(buf)
	// < BatchHeaderSize (after Take) both are stale: every method then
	// resets the builder first, and Sum returns.
	sum    uint32
	summed int
}

// Reset starts a new batch of the topic declared as topic in buf[:0] whose
// first record gets sequence id firstSeq (which must be at least 1 for the
// frame to be valid). It reserves BatchHeaderSize bytes for the header,
// allocating only if buf lacks capacity.
func (b *BatchBuilder) Reset(buf []byte, topic uint32, firstSeq uint64) {
	// One store of the whole builder: Add, which calls Reset, then stays
	// within the compiler's inlining budget (the pump calls it per record).
	// The splices' array is kept for the next frame (see TakeSplices).
	*b = BatchBuilder{buf: append(buf[:0], zeroHeader[:]...), topic: topic, firstSeq: firstSeq, splices: b.splices[:0]}
}

// zeroHeader is what Reset reserves for a frame's header.
var zeroHeader [BatchHeaderSize]byte

// Splice is part of a frame that lives outside the frame's buffer: the
// frame's bytes are the buffer's with Data inserted before offset At (see
// BatchBuilder.AddRef). A frame's splices are in order of At, and two may
// have the same At.
type Splice struct {
	At   int
	Data []byte
}

// AddRef appends a record without metadata as Add does, but without
// copying payload: the frame refers to it (a Splice at the buffer's
// current end), and whoever writes the frame reads it from there, so it
// must not change until nothing reads the frame any more. The record's
// length and flags are copied, and everything added so far, payload
// included, is taken into the frame's CRC at once (see Sum): a frame
// with splices is sent as built, never compressed (FinishCompressed and
// Take send it uncompressed). Frames with splices are for writers that
// write them piece by piece (transport.Splicer); Bytes alone is not the
// frame.
func (b *BatchBuilder) AddRef(payload []byte) {
	if len(b.buf) < BatchHeaderSize {
		b.Reset(b.buf, b.topic, b.firstSeq)
	}
	b.buf = append(binary.AppendUvarint(b.buf, uint64(len(payload))), 0) // flags 0: no metadata
	b.Sum()
	b.sum = crc32c.Update(b.sum, payload)
	b.splices = append(b.splices, Splice{At: len(b.buf), Data: payload})
	b.spliced += len(payload)
	b.count++
}

// AppendFlat appends to dst the frame whose buffer holds frame and whose
// splices are splices (see AddRef): frame's bytes with each splice's Data
// inserted at its At. It is how a writer that cannot write a frame piece
// by piece copies it whole.
func AppendFlat(dst, frame []byte, splices []Splice) []byte {
	for p := range Pieces(frame, splices) {
		dst = append(dst, p...)
	}
	return dst
}

// Pieces yields the bytes of the frame whose buffer holds frame and whose
// splices are splices (see AddRef), piece by piece in frame order: the
// parts of frame between the splices and each splice's Data, empty ones
// included. A writer that writes a frame piece by piece takes them from
// here.
func Pieces(frame []byte, splices []Splice) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		at := 0
		for _, s := range splices {
			if !yield(frame[at:s.At]) || !yield(s.Data) {
				return
			}
			at = s.At
		}
		yield(frame[at:])
	}
}

// Splices returns the splices of the frame under construction (see
// AddRef), nil if it has none. The slice is the builder's until
// TakeSplices or Reset.
func (b *BatchBuilder) Splices() []Splice {
	if len(b.splices) == 0 {
		return nil
	}
	return b.splices
}

// TakeSplices hands the frame's splices over (nil if it has none) and
// keeps dst's memory for the next frame's: the splices' counterpart of
// Take's buffers. Call it after Take or Finish and before the next Reset.
func (b *BatchBuilder) TakeSplices(dst []Splice) []Splice {
	if len(b.splices) == 0 {
		return dst[:0]
	}
	taken := b.splices
	b.splices = dst[:0]
	return taken
}

// Add appends a record without metadata: AddRecord(payload, nil, nil,
// time.Time{}).
func (b *BatchBuilder) Add(payload []byte) {
	if len(b.buf) < BatchHeaderSize {
		b.Reset(b.buf, b.topic, b.firstSeq)
	}
	b.buf = append(binary.AppendUvarint(b.buf, uint64(len(payload))), 0) // flags 0: no metadata
	b.buf = append(b.buf, payload...)
	b.count++
}

// AddRecord appends a record: the uvarint length of what follows its flags
// byte, its flags byte, the metadata that is present (a key of at least one
// byte, at least one header, a non-zero event time) and the payload, all
// copied. The metadata must be
// within the limits CheckMeta checks; AddRecord does not check them, nor any
// frame limit (see RecordOverhead). It allocates only when the buffer is
// full and append must grow it.
func (b *BatchBuilder) AddRecord(payload, key []byte, headers []Header, eventTime time.Time) {
	if len(key) == 0 && len(headers) == 0 && eventTime.IsZero() {
		b.Add(payload)
		return
	}
	b.addMeta(payload, key, headers, eventTime)
}

// addMeta is AddRecord for a record with metadata; kept apart so that
// AddRecord stays small enough to inline.
func (b *BatchBuilder) addMeta(payload, key []byte, headers []Header, eventTime time.Time) {
	if len(b.buf) < BatchHeaderSize {
		b.Reset(b.buf, b.topic, b.firstSeq)
	}
	n := metaLen(key, headers, eventTime) + len(payload)
	b.buf = binary.AppendUvarint(b.buf, uint64(n))
	b.buf = appendMeta(b.buf, key, headers, eventTime)
	b.buf = append(b.buf, payload...)
	b.count++
}

// Grow makes room for n more bytes of records, so that adding them does
// not allocate. When it must allocate, it at least doubles the buffer's
// capacity, up to limit (n beyond it still fits): a buffer that append alone
// grows, by about a quarter at a time beyond 256 bytes, from empty to a
// frame of size S allocates some five to six times S on the way; doubled,
// it allocates at most four times S and keeps at most 2S.
func (b *BatchBuilder) Grow(n, limit int) {
	if len(b.buf) < BatchHeaderSize {
		b.Reset(b.buf, b.topic, b.firstSeq)
	}
	if need := len(b.buf) + n; need > cap(b.buf) {
		grown := make([]byte, len(b.buf), max(need, min(2*cap(b.buf), limit)))
		copy(grown, b.buf)
		b.buf = grown
	}
}

// Count returns the number of records added since Reset.
func (b *BatchBuilder) Count() int { return b.count }

// Size returns the size the frame would have if finished now, header
// and splices included.
func (b *BatchBuilder) Size() int { return max(len(b.buf), BatchHeaderSize) + b.spliced }

// Bytes returns the frame under construction, header not yet filled in,
// without its splices (see AddRef). Its backing array is the builder's
// buffer: keep it to reuse the buffer's capacity in a later Reset.
func (b *BatchBuilder) Bytes() []byte { return b.buf }

// Topic returns the topic id given to Reset.
func (b *BatchBuilder) Topic() uint32 { return b.topic }

// FirstSeq returns the sequence id given to Reset.
func (b *BatchBuilder) FirstSeq() uint64 { return b.firstSeq }

// Finish fills in the header (length, type, firstSeq, count, CodecNone,
// rawLen and CRC) and returns the complete frame, which shares the buffer's
// backing array. The frame is valid for DecodeBatch only if at least one
// record was added, firstSeq was at least 1 and the size fits the limit;
// Finish checks none of these. Call Reset, possibly with the returned
// frame once nothing reads it any more (a transport may still be writing
// it), before building the next batch.
func (b *BatchBuilder) Finish() []byte {
	if len(b.buf) < BatchHeaderSize {
		b.Reset(b.buf, b.topic, b.firstSeq)
	}
	b.Sum()
	size := len(b.buf) + b.spliced
	putBatchHeader(b.buf, size, b.topic, b.firstSeq, b.count, CodecNone, size-BatchHeaderSize, b.sum)
	return b.buf
}

// Sum takes the records added since the last Sum (or Reset) into the
// frame's CRC, which Finish completes with the rest. A caller that adds
// records in runs calls it after each, while the run's bytes are still in
// the CPU's caches, rather than leaving Finish to read the whole frame
// again (docs/performance.md has what it saves the pump). It does not
// change the frame. A frame FinishCompressed compresses has the CRC of
// its compressed block, and the sum is not used: a builder whose frames
// are compressed has no reason to call Sum.
func (b *BatchBuilder) Sum() {
	if len(b.buf) <= BatchHeaderSize {
		return
	}
	from := max(b.summed, BatchHeaderSize)
	b.sum = crc32c.Update(b.sum, b.buf[from:])
	b.summed = len(b.buf)
}

// FinishCompressed builds the batch into dst[:0] with its records block
// compressed by c, when that pays: when the compressed block is at most 7/8
// of the raw one. Otherwise, and for CodecNone, it returns Finish() (in the
// builder's own buffer) and false: the frame then says CodecNone, which is
// how a frame flags "sent uncompressed". It allocates only when dst lacks
// capacity.
func (b *BatchBuilder) FinishCompressed(c *Compressor, dst []byte) (frame []byte, compressed bool) {
	if len(b.buf) < BatchHeaderSize {
		b.Reset(b.buf, b.topic, b.firstSeq)
	}
	raw := b.buf[BatchHeaderSize:]
	if c == nil || c.codec == CodecNone || len(raw) < minCompress || b.spliced > 0 {
		return b.Finish(), false
	}
	var hdr [BatchHeaderSize]byte
	f := c.Append(append(dst[:0], hdr[:]...), raw)
	data := f[BatchHeaderSize:]
	if len(data) > len(raw)-len(raw)/8 {
		return b.Finish(), false
	}
	putBatchHeader(f, len(f), b.topic, b.firstSeq, b.count, c.codec, len(raw), crc32c.Checksum(data))
	return f, true
}

// minCompress is the smallest records block worth compressing: below it the
// codecs' own headers eat the gain.
const minCompress = 64

// putBatchHeader fills the header of the BATCH frame of size bytes whose
// first bytes are f; its data follows BatchHeaderSize and has the CRC-32C
// sum.
func putBatchHeader(f []byte, size int, topic uint32, firstSeq uint64, count int, codec Codec, rawLen int, sum uint32) {
	binary.BigEndian.PutUint32(f, uint32(size-prefixSize))
	f[prefixSize] = byte(TypeBatch)
	binary.BigEndian.PutUint32(f[offTopic:], topic)
	binary.BigEndian.PutUint64(f[offFirstSeq:], firstSeq)
	binary.BigEndian.PutUint32(f[offCount:], uint32(count))
	f[offCodec] = byte(codec)
	binary.BigEndian.PutUint32(f[offRawLen:], uint32(rawLen))
	binary.BigEndian.PutUint32(f[offCRC:], sum)
}

// Take finishes the batch and hands the frame over: compressed into dst
// when c is set and compression pays, else the frame in the builder's own
// buffer, which then takes dst's memory for its next batch. Either way the
// caller owns the returned frame (the builder never writes it again) and
// may pass it back as dst once it is written, so a pool of buffers and one
// builder trade memory without copies or allocations. Start the next batch
// with Reset(b.Bytes(), topic, seq).
func (b *BatchBuilder) Take(c *Compressor, dst []byte) []byte {
	frame, compressed := b.FinishCompressed(c, dst)
	if compressed {
		b.buf = b.buf[:0]
		return frame
	}
	b.buf = dst[:0]
	return frame
}
