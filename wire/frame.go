package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
)

const (
	// HeaderSize is the size of the part every frame starts with: the u32
	// length prefix and the u8 type.
	HeaderSize = 5

	// DefaultMaxFrameSize is the frame size limit (prefix included) used
	// until a connection negotiates another, and by Split when given a limit
	// of zero or less.
	DefaultMaxFrameSize = 4 << 20

	// MinMaxFrameSize is the smallest frame size limit a peer may announce.
	// HELLO and HELLO_OK frames announcing less are malformed.
	MinMaxFrameSize = 1 << 10

	// Version is the protocol version this package speaks, sent in HELLO.
	// Version 2 added the topic to HELLO and the metadata (key, headers,
	// event time) to each record; version 3 the epoch to HELLO and
	// HELLO_OK (fencing, see Hello); version 4 many topics per connection
	// (TOPIC, TOPIC_OK and TOPIC_ERROR; a topic id in BATCH and RECEIPT;
	// no topic in HELLO, no sequence ID in HELLO_OK). A broker answers a
	// HELLO of another version with an ERROR frame of code CodeVersion.
	Version uint16 = 4
)

// prefixSize is the size of the length prefix.
const prefixSize = 4

// Type is the kind of a frame, its fifth byte.
type Type uint8

// Frame types.
const (
	TypeHello      Type = 1  // producer -> broker: version, limit, producer name, epoch
	TypeHelloOK    Type = 2  // broker -> producer: limit, epoch
	TypeBatch      Type = 3  // producer -> broker: records of one declared topic
	TypeReceipt    Type = 4  // broker -> producer: highest stored seq, per topic
	TypeError      Type = 5  // broker -> producer: code and text, then close
	TypePing       Type = 6  // producer -> broker: liveness probe (after HELLO only)
	TypePong       Type = 7  // broker -> producer: answer to PING with its nonce
	TypeTopic      Type = 8  // producer -> broker: declares a topic id for this connection
	TypeTopicOK    Type = 9  // broker -> producer: the topic's last stored seq
	TypeTopicError Type = 10 // broker -> producer: the topic is refused; the connection goes on
)

var typeNames = [...]string{
	TypeHello:      "HELLO",
	TypeHelloOK:    "HELLO_OK",
	TypeBatch:      "BATCH",
	TypeReceipt:    "RECEIPT",
	TypeError:      "ERROR",
	TypePing:       "PING",
	TypePong:       "PONG",
	TypeTopic:      "TOPIC",
	TypeTopicOK:    "TOPIC_OK",
	TypeTopicError: "TOPIC_ERROR",
}

// String returns the type's name as the protocol spells it ("HELLO_OK"),
// or "Type(n)" for unknown values.
func (t Type) String() string {
	if t.known() {
		return typeNames[t]
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// known reports whether t is one of the Type constants.
func (t Type) known() bool { return t >= TypeHello && t <= TypeTopicError }

// FrameSize returns the total size of the frame whose first bytes are
// prefix, length prefix included, and false if prefix holds fewer than 4
// bytes. It does not check the size against any limit.
func FrameSize(prefix []byte) (int, bool) {
	if len(prefix) < prefixSize {
		return 0, false
	}
	size := uint64(binary.BigEndian.Uint32(prefix)) + prefixSize
	if size > math.MaxInt { // only on 32-bit platforms
		return math.MaxInt, true
	}
	return int(size), true
}

// Split finds the frame at the start of buf, for parsing a byte stream.
//
// It returns the frame (a sub-slice of buf with its capacity capped at its
// length, no copy) and its size n, which the caller consumes. If buf is too
// short to hold the frame, or even its prefix, it returns (nil, 0, nil):
// read more bytes and call again. As soon as the prefix is readable it
// returns ErrFrameTooLarge if the frame would exceed maxFrameSize (a limit
// of zero or less means DefaultMaxFrameSize), or ErrMalformed if the length
// is zero, so a reader never buffers a frame it would reject. After an error
// the stream cannot be resynchronised and should be closed.
//
// Split checks only the length prefix; TypeOf and the Decode functions
// check the rest. It does not allocate unless it returns an error.
func Split(buf []byte, maxFrameSize int) (frame []byte, n int, err error) {
	if len(buf) < prefixSize {
		return nil, 0, nil
	}
	length := binary.BigEndian.Uint32(buf)
	if length == 0 {
		return nil, 0, fmt.Errorf("%w: zero length prefix", ErrMalformed)
	}
	if maxFrameSize <= 0 {
		maxFrameSize = DefaultMaxFrameSize
	}
	size := uint64(length) + prefixSize
	if size > uint64(maxFrameSize) {
		return nil, 0, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, size, maxFrameSize)
	}
	if uint64(len(buf)) < size {
		return nil, 0, nil
	}
	n = int(size)
	return buf[:n:n], n, nil
}

// TypeOf checks that frame is exactly one complete frame (its length
// prefix matches len(frame) and is not zero) and returns its type.
//
// It returns ErrTruncated if frame is shorter than its prefix says,
// ErrMalformed for a zero prefix or bytes after the declared end, and
// ErrUnknownType for a type byte that is not a Type constant.
func TypeOf(frame []byte) (Type, error) {
	if len(frame) < prefixSize {
		return 0, fmt.Errorf("%w: %d bytes, want at least %d", ErrTruncated, len(frame), HeaderSize)
	}
	length := binary.BigEndian.Uint32(frame)
	if length == 0 {
		return 0, fmt.Errorf("%w: zero length prefix", ErrMalformed)
	}
	size := uint64(length) + prefixSize
	switch {
	case uint64(len(frame)) < size:
		return 0, fmt.Errorf("%w: %d bytes, prefix says %d", ErrTruncated, len(frame), size)
	case uint64(len(frame)) > size:
		return 0, fmt.Errorf("%w: %d trailing bytes after frame", ErrMalformed, uint64(len(frame))-size)
	}
	t := Type(frame[prefixSize])
	if !t.known() {
		return 0, fmt.Errorf("%w: %d", ErrUnknownType, uint8(t))
	}
	return t, nil
}

// body checks frame with TypeOf, checks that it is of type want and
// returns its body, aliasing frame.
func body(frame []byte, want Type) ([]byte, error) {
	t, err := TypeOf(frame)
	if err != nil {
		return nil, err
	}
	if t != want {
		return nil, fmt.Errorf("%w: got %v, want %v", ErrUnexpectedType, t, want)
	}
	return frame[HeaderSize:], nil
}

// fixedBody is body for types whose body has exactly n bytes.
func fixedBody(frame []byte, want Type, n int) ([]byte, error) {
	b, err := body(frame, want)
	if err != nil {
		return nil, err
	}
	return b, checkLen(want, b, n)
}

// checkLen returns ErrTruncated if b is shorter than n bytes and
// ErrMalformed if it is longer.
func checkLen(t Type, b []byte, n int) error {
	switch {
	case len(b) < n:
		return fmt.Errorf("%w: %v body is %d bytes, want %d", ErrTruncated, t, len(b), n)
	case len(b) > n:
		return fmt.Errorf("%w: %v body is %d bytes, want %d", ErrMalformed, t, len(b), n)
	}
	return nil
}

// appendHeader appends the length prefix and type of a frame whose body
// will be bodyLen bytes.
func appendHeader(dst []byte, t Type, bodyLen int) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(1+bodyLen))
	return append(dst, byte(t))
}
