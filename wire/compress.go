package wire

import (
	"fmt"
	"slices"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// Level trades compression speed for ratio. zstd maps it to its fastest,
// default and better-compression encoders; s2 to its default and "better"
// modes (Fastest and Default are the same); snappy ignores it.
type Level int8

// Levels.
const (
	LevelFastest Level = iota
	LevelDefault
	LevelBetter
)

var levelNames = [...]string{"fastest", "default", "better"}

func (l Level) String() string {
	if l >= 0 && int(l) < len(levelNames) {
		return levelNames[l]
	}
	return fmt.Sprintf("Level(%d)", int8(l))
}

// Compressor compresses records blocks with one codec, reusing its state:
// create one per producer. It is not safe for concurrent use. It starts no
// goroutine; Close releases its buffers.
type Compressor struct {
	codec Codec
	level Level
	zstd  *zstd.Encoder
}

// NewCompressor returns a Compressor for c at level l. CodecNone is
// accepted (Append then copies); an unknown codec or level returns
// ErrUnsupportedCodec.
func NewCompressor(c Codec, l Level) (*Compressor, error) {
	if err := CheckCompression(c, l); err != nil {
		return nil, err
	}
	cp := &Compressor{codec: c, level: l}
	if c == CodecZstd {
		speed := [...]zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault, zstd.SpeedBetterCompression}[l]
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(speed), zstd.WithEncoderConcurrency(1),
			zstd.WithEncoderCRC(false)) // the frame has its own CRC-32C
		if err != nil {
			return nil, fmt.Errorf("inflight/wire: zstd encoder: %w", err)
		}
		cp.zstd = enc
	}
	return cp, nil
}

// CheckCompression returns the error NewCompressor gives for codec c at
// level l (ErrUnsupportedCodec), or nil, without building an encoder.
func CheckCompression(c Codec, l Level) error {
	if !c.known() {
		return fmt.Errorf("%w: %v", ErrUnsupportedCodec, c)
	}
	if l < LevelFastest || l > LevelBetter {
		return fmt.Errorf("%w: level %v", ErrUnsupportedCodec, l)
	}
	return nil
}

// Codec returns the compressor's codec.
func (c *Compressor) Codec() Codec { return c.codec }

// Append appends src compressed to dst and returns the extended slice. It
// allocates only if dst lacks capacity (for s2 and snappy, room for
// s2.MaxEncodedLen(len(src)) bytes).
func (c *Compressor) Append(dst, src []byte) []byte {
	switch c.codec {
	case CodecZstd:
		return c.zstd.EncodeAll(src, dst)
	case CodecS2, CodecSnappy:
		n := len(dst)
		dst = slices.Grow(dst, s2.MaxEncodedLen(len(src)))
		var out []byte
		switch {
		case c.codec == CodecSnappy:
			out = s2.EncodeSnappy(dst[n:cap(dst)], src)
		case c.level == LevelBetter:
			out = s2.EncodeBetter(dst[n:cap(dst)], src)
		default:
			out = s2.Encode(dst[n:cap(dst)], src)
		}
		return dst[:n+len(out)]
	}
	return append(dst, src...)
}

// Bound returns the most bytes Append can add for n bytes of input. A dst
// with that much spare capacity makes Append allocation-free, and a caller
// that keeps such a buffer across batches keeps its capacity even when
// compression does not pay.
func (c *Compressor) Bound(n int) int {
	switch c.codec {
	case CodecS2, CodecSnappy:
		return s2.MaxEncodedLen(n)
	case CodecZstd:
		// zstd's own bound (ZSTD_COMPRESSBOUND), plus room for the frame
		// header.
		b := n + n>>8 + 32
		if n < 128<<10 {
			b += (128<<10 - n) >> 11
		}
		return b
	}
	return n
}

// Close releases the compressor's resources. It is idempotent.
func (c *Compressor) Close() {
	if c.zstd != nil {
		c.zstd.Close()
	}
}

// Decompressor decodes records blocks of every codec without ever producing
// more than its limit: the size a BATCH header claims is checked against the
// limit before any allocation, s2 and snappy blocks are checked by their own
// length header first, and zstd decodes into a buffer capped at the claimed
// size with a decoder whose memory is capped at the limit. (A lying zstd
// frame can still cost up to about 2.5 times the limit: the zstd package
// appends a whole block, up to 128 KiB, before it checks the cap.) Create one per broker;
// it is safe for concurrent use and starts no goroutine. Close releases it.
type Decompressor struct {
	limit int
	zstd  *zstd.Decoder
}

// NewDecompressor returns a Decompressor that refuses records blocks larger
// than limit bytes.
func NewDecompressor(limit int) (*Decompressor, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("%w: decompression limit %d", ErrMalformed, limit)
	}
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderMaxMemory(uint64(limit)),
		zstd.WithDecoderMaxWindow(uint64(max(limit, zstd.MinWindowSize))),
		zstd.WithDecodeAllCapLimit(true),
		zstd.WithDecoderConcurrency(0))
	if err != nil {
		return nil, fmt.Errorf("inflight/wire: zstd decoder: %w", err)
	}
	return &Decompressor{limit: limit, zstd: dec}, nil
}

// Limit returns the largest records block the decompressor produces.
func (d *Decompressor) Limit() int { return d.limit }

// Decode decodes src, compressed with c, whose decoded size must be exactly
// rawLen, into dst[:0] (grown if needed) and returns the result. It returns
// ErrFrameTooLarge for a rawLen over the limit (before allocating), and
// ErrMalformed for data that does not decode to exactly rawLen bytes.
func (d *Decompressor) Decode(dst []byte, c Codec, src []byte, rawLen int) ([]byte, error) {
	if rawLen < 0 || rawLen > d.limit {
		return dst[:0], fmt.Errorf("%w: records block of %d bytes, limit %d", ErrFrameTooLarge, rawLen, d.limit)
	}
	switch c {
	case CodecNone:
		if len(src) != rawLen {
			return dst[:0], errRawLen(uint32(rawLen), len(src))
		}
		return append(dst[:0], src...), nil
	case CodecS2, CodecSnappy:
		// The block's own length header must agree before anything is
		// allocated for it.
		n, err := s2.DecodedLen(src)
		if err != nil {
			return dst[:0], fmt.Errorf("%w: %v block: %v", ErrMalformed, c, err)
		}
		if n != rawLen {
			return dst[:0], fmt.Errorf("%w: %v block decodes to %d bytes, header says %d", ErrMalformed, c, n, rawLen)
		}
		dst = slices.Grow(dst[:0], rawLen)
		out, err := s2.Decode(dst[:rawLen], src)
		if err != nil {
			return dst[:0], fmt.Errorf("%w: %v block: %v", ErrMalformed, c, err)
		}
		return out, nil
	case CodecZstd:
		dst = slices.Grow(dst[:0], rawLen)
		out, err := d.zstd.DecodeAll(src, dst[:0:rawLen])
		if err != nil {
			return dst[:0], fmt.Errorf("%w: zstd block: %v", ErrMalformed, err)
		}
		if len(out) != rawLen {
			return dst[:0], fmt.Errorf("%w: zstd block decodes to %d bytes, header says %d", ErrMalformed, len(out), rawLen)
		}
		return out, nil
	}
	return dst[:0], fmt.Errorf("%w: %v", ErrUnsupportedCodec, c)
}

// Close releases the decompressor. It is idempotent.
func (d *Decompressor) Close() { d.zstd.Close() }
