package wire

import "errors"

// Errors returned by this package. They are wrapped with detail, so test for
// them with errors.Is. CodeOf maps them to the ErrorCode sent in an ERROR frame.
var (
	// ErrTruncated is returned by TypeOf and the Decode functions when a frame
	// is shorter than its length prefix says, or shorter than its header or
	// body needs.
	ErrTruncated = errors.New("inflight/wire: truncated frame")

	// ErrFrameTooLarge is returned by Split when a length prefix announces a
	// frame larger than the limit. It is returned as soon as the prefix is
	// readable, before the body arrives.
	ErrFrameTooLarge = errors.New("inflight/wire: frame too large")

	// ErrUnknownType is returned by TypeOf and the Decode functions when the
	// type byte is not one of the Type constants.
	ErrUnknownType = errors.New("inflight/wire: unknown frame type")

	// ErrMalformed is returned when a frame is structurally wrong: a zero
	// length prefix, bytes after the declared end, a field value out of range,
	// a bad uvarint, record lengths that do not add up to the data, or a record
	// count that does not match the header. AppendHello returns it for a Hello
	// that cannot be encoded.
	ErrMalformed = errors.New("inflight/wire: malformed frame")

	// ErrChecksum is returned by DecodeBatch when the CRC-32C of the batch data
	// does not match the header.
	ErrChecksum = errors.New("inflight/wire: batch checksum mismatch")

	// ErrUnsupportedCodec is returned by DecodeBatch for a codec value it does
	// not know, and by Batch.Records and Batch.AppendRecords for a codec this
	// version cannot decode.
	ErrUnsupportedCodec = errors.New("inflight/wire: unsupported codec")

	// ErrVersion is returned by DecodeHello when the HELLO's protocol version
	// is not Version.
	ErrVersion = errors.New("inflight/wire: unsupported protocol version")

	// ErrMetaLimit is returned by CheckMeta for a record key, headers or
	// event time over a limit.
	ErrMetaLimit = errors.New("inflight/wire: record metadata over a limit")

	// ErrUnexpectedType is returned by a Decode function given a well-formed
	// frame of another type.
	ErrUnexpectedType = errors.New("inflight/wire: unexpected frame type")
)
