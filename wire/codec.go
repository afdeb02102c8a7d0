package wire

import "strconv"

// Codec says how the records block of a BATCH is compressed.
//
// A compressed batch is read by Batch.Decompress (with a Decompressor)
// first; Batch.Records reads only CodecNone batches and returns
// ErrUnsupportedCodec for the others.
type Codec uint8

// Codecs. DecodeBatch rejects values above CodecSnappy with ErrUnsupportedCodec.
const (
	CodecNone   Codec = 0 // records block carried as is
	CodecZstd   Codec = 1 // zstd frame
	CodecS2     Codec = 2 // s2 block
	CodecSnappy Codec = 3 // snappy block
)

var codecNames = [...]string{
	CodecNone:   "none",
	CodecZstd:   "zstd",
	CodecS2:     "s2",
	CodecSnappy: "snappy",
}

// String returns the codec's name, or "Codec(n)" for unknown values.
func (c Codec) String() string {
	if int(c) < len(codecNames) {
		return codecNames[c]
	}
	return "Codec(" + strconv.Itoa(int(c)) + ")"
}

// known reports whether c is one of the Codec constants.
func (c Codec) known() bool { return c <= CodecSnappy }
