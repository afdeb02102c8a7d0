package wire

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"
)

const (
	// MaxProducerNameLen is the longest producer name a HELLO can carry, in bytes.
	MaxProducerNameLen = 255

	// MaxErrorTextLen is the longest text an ERROR can carry, in bytes.
	MaxErrorTextLen = 1024

	// MaxTokenLen is the longest token a HELLO can carry, in bytes. A
	// HELLO with a token must also fit the broker's frame limit.
	MaxTokenLen = 4096
)

// Body sizes of the fixed-size control frames.
const (
	helloFixedLen = 2 + 4 + 8 + 1 + 1 + 1 // version, maxFrameSize, epoch, flags, nameLen, topicLen
	tokenLenLen   = 2                     // the optional token's length
	helloOKLen    = 8 + 4 + 8
	receiptLen    = 8
	errorFixedLen = 2
	nonceLen      = 8
)

// Hello opens a session: the producer's protocol version, the largest frame
// it accepts, its incarnation of its name (see Epoch), how it takes the
// name, its name, the topic it writes and, optionally, a token that
// authenticates it. The broker keeps the last stored sequence id and the
// newest epoch per (topic, name).
//
//	+---------+--------------+-----------+----------+---------+------+---------+-------+
//	| u16 ver | u32 maxFrame | u64 epoch | u8 flags | u8 nlen | name | u8 tlen | topic |
//	+---------+--------------+-----------+----------+---------+------+---------+-------+
//	optional:  +----------+-------+
//	           | u16 klen | token |
//	           +----------+-------+
//
// flags: bit 0 is Yield; the other bits are zero. The token is a trailing
// field: a HELLO without one ends with the topic. A broker of protocol
// version 2 answers this HELLO with an ERROR of code CodeVersion.
type Hello struct {
	Version      uint16 // protocol version; DecodeHello accepts only Version
	MaxFrameSize uint32 // at least MinMaxFrameSize
	// Epoch is the producer's incarnation of its name: 0 asks the broker
	// for a new one (a producer's first HELLO), which fences every older
	// incarnation; otherwise the epoch a HELLO_OK gave this producer
	// (a reconnect). The broker refuses a HELLO whose epoch is below the
	// name's newest with an ERROR of code CodeFenced.
	Epoch uint64
	// Yield asks the broker not to take the name from a live session of
	// another incarnation: a HELLO of epoch 0 is then refused with an
	// ERROR of code CodeNameInUse while one holds the name, instead of
	// fencing it.
	Yield    bool
	Producer string // 1 to MaxProducerNameLen bytes
	Topic    string // see CheckTopic
	Token    Token  // empty (none), or 1 to MaxTokenLen bytes
}

// helloYield is the flags bit of Hello.Yield.
const helloYield = 1

// AppendHello appends a HELLO frame to dst. It returns dst unchanged and
// ErrMalformed if the name is empty or longer than MaxProducerNameLen
// bytes, if the topic fails CheckTopic, or if MaxFrameSize is below
// MinMaxFrameSize. The version is
// encoded as given. It allocates only if dst lacks capacity.
func AppendHello(dst []byte, h Hello) ([]byte, error) {
	if len(h.Producer) == 0 || len(h.Producer) > MaxProducerNameLen {
		return dst, fmt.Errorf("%w: producer name is %d bytes, want 1 to %d",
			ErrMalformed, len(h.Producer), MaxProducerNameLen)
	}
	if err := CheckTopic(h.Topic); err != nil {
		return dst, err
	}
	if h.MaxFrameSize < MinMaxFrameSize {
		return dst, fmt.Errorf("%w: max frame size %d below %d", ErrMalformed, h.MaxFrameSize, MinMaxFrameSize)
	}
	if len(h.Token) > MaxTokenLen {
		return dst, fmt.Errorf("%w: token is %d bytes, limit %d", ErrMalformed, len(h.Token), MaxTokenLen)
	}
	n := helloFixedLen + len(h.Producer) + len(h.Topic)
	if len(h.Token) > 0 {
		n += tokenLenLen + len(h.Token)
	}
	var flags byte
	if h.Yield {
		flags |= helloYield
	}
	dst = appendHeader(dst, TypeHello, n)
	dst = binary.BigEndian.AppendUint16(dst, h.Version)
	dst = binary.BigEndian.AppendUint32(dst, h.MaxFrameSize)
	dst = binary.BigEndian.AppendUint64(dst, h.Epoch)
	dst = append(dst, flags)
	dst = append(dst, byte(len(h.Producer)))
	dst = append(dst, h.Producer...)
	dst = append(dst, byte(len(h.Topic)))
	dst = append(dst, h.Topic...)
	if len(h.Token) > 0 {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(h.Token)))
		dst = append(dst, h.Token...)
	}
	return dst, nil
}

// DecodeHello decodes a HELLO frame. The version is checked first, as soon
// as it is readable, so that a HELLO of another version, laid out
// differently (version 1 had no topic, version 2 no epoch), yields
// ErrVersion and not ErrMalformed. A token field present but empty, and a
// flags bit this version does not define, are malformed, so that every
// HELLO has one encoding. It allocates the producer name, the topic and
// the token.
func DecodeHello(frame []byte) (Hello, error) {
	b, err := body(frame, TypeHello)
	if err != nil {
		return Hello{}, err
	}
	if len(b) >= 2 {
		if v := binary.BigEndian.Uint16(b); v != Version {
			return Hello{}, fmt.Errorf("%w: peer speaks %d, want %d", ErrVersion, v, Version)
		}
	}
	if len(b) < helloFixedLen {
		return Hello{}, checkLen(TypeHello, b, helloFixedLen)
	}
	const offFlags, offName = 14, 15 // after version, maxFrame and epoch; the name's length
	nameLen := int(b[offName])
	if nameLen == 0 {
		return Hello{}, fmt.Errorf("%w: empty producer name", ErrMalformed)
	}
	if len(b) < helloFixedLen+nameLen {
		return Hello{}, checkLen(TypeHello, b, helloFixedLen+nameLen)
	}
	topicLen := int(b[offName+1+nameLen])
	end := helloFixedLen + nameLen + topicLen
	if len(b) < end {
		return Hello{}, checkLen(TypeHello, b, end)
	}
	tok, err := decodeToken(b[end:])
	if err != nil {
		return Hello{}, err
	}
	b = b[:end]
	flags := b[offFlags]
	if flags&^helloYield != 0 {
		return Hello{}, fmt.Errorf("%w: HELLO flags %#02x", ErrMalformed, flags)
	}
	h := Hello{
		Version:      Version,
		MaxFrameSize: binary.BigEndian.Uint32(b[2:]),
		Epoch:        binary.BigEndian.Uint64(b[6:]),
		Yield:        flags&helloYield != 0,
	}
	if h.MaxFrameSize < MinMaxFrameSize {
		return Hello{}, fmt.Errorf("%w: max frame size %d below %d", ErrMalformed, h.MaxFrameSize, MinMaxFrameSize)
	}
	h.Topic = string(b[helloFixedLen+nameLen:])
	if err := CheckTopic(h.Topic); err != nil {
		return Hello{}, err
	}
	h.Producer = string(b[offName+1 : offName+1+nameLen])
	h.Token = Token(tok)
	return h, nil
}

// decodeToken reads the optional token field that follows the topic.
func decodeToken(b []byte) ([]byte, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if len(b) < tokenLenLen {
		return nil, fmt.Errorf("%w: %d byte after the topic", ErrMalformed, len(b))
	}
	n := int(binary.BigEndian.Uint16(b))
	switch {
	case n == 0:
		return nil, fmt.Errorf("%w: empty token field", ErrMalformed)
	case n > MaxTokenLen:
		return nil, fmt.Errorf("%w: token is %d bytes, limit %d", ErrMalformed, n, MaxTokenLen)
	}
	if err := checkLen(TypeHello, b[tokenLenLen:], n); err != nil {
		return nil, err
	}
	return b[tokenLenLen:], nil
}

// HelloOK accepts a session: the highest sequence id the broker has stored
// for this producer (0 if none), the largest frame the broker accepts, and
// the producer's epoch: the one its HELLO gave, or, for a HELLO of epoch
// 0, the new one the broker assigned and stored.
//
//	+-------------+--------------+-----------+
//	| u64 lastSeq | u32 maxFrame | u64 epoch |
//	+-------------+--------------+-----------+
type HelloOK struct {
	LastSeq      uint64
	MaxFrameSize uint32 // DecodeHelloOK rejects values below MinMaxFrameSize
	Epoch        uint64 // at least 1
}

// AppendHelloOK appends a HELLO_OK frame to dst. It encodes the fields as
// given; a MaxFrameSize below MinMaxFrameSize or an Epoch of 0 makes a
// frame the peer will reject. It allocates only if dst lacks capacity.
func AppendHelloOK(dst []byte, h HelloOK) []byte {
	dst = appendHeader(dst, TypeHelloOK, helloOKLen)
	dst = binary.BigEndian.AppendUint64(dst, h.LastSeq)
	dst = binary.BigEndian.AppendUint32(dst, h.MaxFrameSize)
	return binary.BigEndian.AppendUint64(dst, h.Epoch)
}

// DecodeHelloOK decodes a HELLO_OK frame. It returns ErrMalformed if
// MaxFrameSize is below MinMaxFrameSize or Epoch is 0. It does not
// allocate on success.
func DecodeHelloOK(frame []byte) (HelloOK, error) {
	b, err := fixedBody(frame, TypeHelloOK, helloOKLen)
	if err != nil {
		return HelloOK{}, err
	}
	h := HelloOK{
		LastSeq:      binary.BigEndian.Uint64(b),
		MaxFrameSize: binary.BigEndian.Uint32(b[8:]),
		Epoch:        binary.BigEndian.Uint64(b[12:]),
	}
	if h.MaxFrameSize < MinMaxFrameSize {
		return HelloOK{}, fmt.Errorf("%w: max frame size %d below %d", ErrMalformed, h.MaxFrameSize, MinMaxFrameSize)
	}
	if h.Epoch == 0 {
		return HelloOK{}, fmt.Errorf("%w: epoch 0", ErrMalformed)
	}
	return h, nil
}

// Receipt acknowledges storage: every record of this producer with a
// sequence id up to and including Seq is stored. Receipts are cumulative.
type Receipt struct {
	Seq uint64
}

// AppendReceipt appends a RECEIPT frame to dst. It allocates only if dst
// lacks capacity.
func AppendReceipt(dst []byte, r Receipt) []byte {
	dst = appendHeader(dst, TypeReceipt, receiptLen)
	return binary.BigEndian.AppendUint64(dst, r.Seq)
}

// DecodeReceipt decodes a RECEIPT frame. It does not allocate on success.
func DecodeReceipt(frame []byte) (Receipt, error) {
	b, err := fixedBody(frame, TypeReceipt, receiptLen)
	if err != nil {
		return Receipt{}, err
	}
	return Receipt{Seq: binary.BigEndian.Uint64(b)}, nil
}

// Error reports why the sender is about to close the connection. It is the
// frame, not an error value: use Err for that.
type Error struct {
	Code ErrorCode
	Text string // at most MaxErrorTextLen bytes on the wire
}

// Err returns the frame as an error value of type *RemoteError.
func (e Error) Err() error {
	return &RemoteError{Code: e.Code, Text: e.Text}
}

// AppendError appends an ERROR frame to dst. Text longer than
// MaxErrorTextLen bytes is cut to that length, or a few bytes less so as not
// to split a UTF-8 sequence. It allocates only if dst lacks capacity.
func AppendError(dst []byte, e Error) []byte {
	text := truncateText(e.Text)
	dst = appendHeader(dst, TypeError, errorFixedLen+len(text))
	dst = binary.BigEndian.AppendUint16(dst, uint16(e.Code))
	return append(dst, text...)
}

// truncateText cuts s to at most MaxErrorTextLen bytes, backing up to the
// start of a rune when the cut would fall inside one (at most 3 bytes, the
// longest UTF-8 tail, so invalid input cannot make it back up further).
func truncateText(s string) string {
	if len(s) <= MaxErrorTextLen {
		return s
	}
	cut := MaxErrorTextLen
	for i := 0; i < utf8.UTFMax-1 && !utf8.RuneStart(s[cut]); i++ {
		cut--
	}
	return s[:cut]
}

// DecodeError decodes an ERROR frame. It accepts any code, known or not,
// and returns ErrMalformed if the text exceeds MaxErrorTextLen bytes. It
// allocates the text.
func DecodeError(frame []byte) (Error, error) {
	b, err := body(frame, TypeError)
	if err != nil {
		return Error{}, err
	}
	if len(b) < errorFixedLen {
		return Error{}, checkLen(TypeError, b, errorFixedLen)
	}
	if n := len(b) - errorFixedLen; n > MaxErrorTextLen {
		return Error{}, fmt.Errorf("%w: error text is %d bytes, limit %d", ErrMalformed, n, MaxErrorTextLen)
	}
	return Error{
		Code: ErrorCode(binary.BigEndian.Uint16(b)),
		Text: string(b[errorFixedLen:]),
	}, nil
}

// Ping asks the peer to answer with a Pong carrying the same Nonce.
type Ping struct {
	Nonce uint64
}

// Pong answers a Ping with its Nonce.
type Pong struct {
	Nonce uint64
}

// AppendPing appends a PING frame to dst. It allocates only if dst lacks
// capacity.
func AppendPing(dst []byte, p Ping) []byte {
	dst = appendHeader(dst, TypePing, nonceLen)
	return binary.BigEndian.AppendUint64(dst, p.Nonce)
}

// DecodePing decodes a PING frame. It does not allocate on success.
func DecodePing(frame []byte) (Ping, error) {
	b, err := fixedBody(frame, TypePing, nonceLen)
	if err != nil {
		return Ping{}, err
	}
	return Ping{Nonce: binary.BigEndian.Uint64(b)}, nil
}

// AppendPong appends a PONG frame to dst. It allocates only if dst lacks
// capacity.
func AppendPong(dst []byte, p Pong) []byte {
	dst = appendHeader(dst, TypePong, nonceLen)
	return binary.BigEndian.AppendUint64(dst, p.Nonce)
}

// DecodePong decodes a PONG frame. It does not allocate on success.
func DecodePong(frame []byte) (Pong, error) {
	b, err := fixedBody(frame, TypePong, nonceLen)
	if err != nil {
		return Pong{}, err
	}
	return Pong{Nonce: binary.BigEndian.Uint64(b)}, nil
}
