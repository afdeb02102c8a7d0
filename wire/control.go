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
	helloFixedLen = 2 + 4 + 8 + 8 + 1 + 1 // version, maxFrameSize, epoch, instance, flags, nameLen
	tokenLenLen   = 2                     // the optional token's length
	helloOKLen    = 4 + 8
	receiptEntry  = 4 + 8 // topic id, seq
	topicOKLen    = 4 + 8
	errorFixedLen = 2
	topicErrorLen = 4 + 2 // topic id, code
	nonceLen      = 8
)

// MaxReceiptEntries is the most topics one RECEIPT frame acknowledges.
const MaxReceiptEntries = 4096

// Hello opens a session: the producer's protocol version, the largest frame
// it accepts, its incarnation of its name (see Epoch), how it takes the
// name, its name and, optionally, a token that authenticates it. Topics are
// declared after it, one TOPIC frame each (see Topic). The broker keeps
// the newest epoch per name and the last stored sequence id per (topic,
// name).
//
//	+---------+--------------+-----------+--------------+----------+---------+------+
//	| u16 ver | u32 maxFrame | u64 epoch | u64 instance | u8 flags | u8 nlen | name |
//	+---------+--------------+-----------+--------------+----------+---------+------+
//	optional:  +----------+-------+
//	           | u16 klen | token |
//	           +----------+-------+
//
// flags: bit 0 is Yield; the other bits are zero. The token is a trailing
// field: a HELLO without one ends with the name. A broker of protocol
// version 3 answers this HELLO with an ERROR of code CodeVersion, and so
// does this package's broker a HELLO of version 3.
type Hello struct {
	Version      uint16 // protocol version; DecodeHello accepts only Version
	MaxFrameSize uint32 // at least MinMaxFrameSize
	// Epoch is the producer's incarnation of its name: 0 asks the broker
	// for a new one (a producer's first HELLO), which fences every older
	// incarnation on every topic; otherwise the epoch a HELLO_OK gave this
	// producer (a reconnect). The broker refuses a HELLO whose epoch is
	// below the name's newest with an ERROR of code CodeFenced.
	Epoch uint64
	// Instance is a random number a Producer draws once and sends in every
	// HELLO (0: none). Two HELLOs of epoch 0 with the same Instance come
	// from one Producer that redialed before it heard the first answer: the
	// broker gives the second the epoch it gave the first instead of
	// fencing the Producer with itself.
	Instance uint64
	// Yield asks the broker not to take the name from a live session of
	// another incarnation: a HELLO of epoch 0 is then refused with an
	// ERROR of code CodeNameInUse while one holds the name, instead of
	// fencing it.
	Yield    bool
	Producer string // 1 to MaxProducerNameLen bytes
	Token    Token  // empty (none), or 1 to MaxTokenLen bytes
}

// helloYield is the flags bit of Hello.Yield.
const helloYield = 1

// AppendHello appends a HELLO frame to dst. It returns dst unchanged and
// ErrMalformed if the name is empty or longer than MaxProducerNameLen
// bytes, or if MaxFrameSize is below MinMaxFrameSize. The version is
// encoded as given. It allocates only if dst lacks capacity.
func AppendHello(dst []byte, h Hello) ([]byte, error) {
	if len(h.Producer) == 0 || len(h.Producer) > MaxProducerNameLen {
		return dst, fmt.Errorf("%w: producer name is %d bytes, want 1 to %d",
			ErrMalformed, len(h.Producer), MaxProducerNameLen)
	}
	if h.MaxFrameSize < MinMaxFrameSize {
		return dst, fmt.Errorf("%w: max frame size %d below %d", ErrMalformed, h.MaxFrameSize, MinMaxFrameSize)
	}
	if len(h.Token) > MaxTokenLen {
		return dst, fmt.Errorf("%w: token is %d bytes, limit %d", ErrMalformed, len(h.Token), MaxTokenLen)
	}
	n := helloFixedLen + len(h.Producer)
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
	dst = binary.BigEndian.AppendUint64(dst, h.Instance)
	dst = append(dst, flags)
	dst = append(dst, byte(len(h.Producer)))
	dst = append(dst, h.Producer...)
	if len(h.Token) > 0 {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(h.Token)))
		dst = append(dst, h.Token...)
	}
	return dst, nil
}

// DecodeHello decodes a HELLO frame. The version is checked first, as soon
// as it is readable, so that a HELLO of another version, laid out
// differently (version 1 had no topic, version 2 no epoch, version 3 a
// topic), yields ErrVersion and not ErrMalformed. A token field present but
// empty, and a flags bit this version does not define, are malformed, so
// that every HELLO has one encoding. It allocates the producer name and
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
	const offFlags, offName = 22, 23 // after version, maxFrame, epoch and instance; the name's length
	nameLen := int(b[offName])
	if nameLen == 0 {
		return Hello{}, fmt.Errorf("%w: empty producer name", ErrMalformed)
	}
	end := helloFixedLen + nameLen
	if len(b) < end {
		return Hello{}, checkLen(TypeHello, b, end)
	}
	tok, err := decodeToken(b[end:])
	if err != nil {
		return Hello{}, err
	}
	flags := b[offFlags]
	if flags&^helloYield != 0 {
		return Hello{}, fmt.Errorf("%w: HELLO flags %#02x", ErrMalformed, flags)
	}
	h := Hello{
		Version:      Version,
		MaxFrameSize: binary.BigEndian.Uint32(b[2:]),
		Epoch:        binary.BigEndian.Uint64(b[6:]),
		Instance:     binary.BigEndian.Uint64(b[14:]),
		Yield:        flags&helloYield != 0,
	}
	if h.MaxFrameSize < MinMaxFrameSize {
		return Hello{}, fmt.Errorf("%w: max frame size %d below %d", ErrMalformed, h.MaxFrameSize, MinMaxFrameSize)
	}
	h.Producer = string(b[offName+1 : end])
	h.Token = Token(tok)
	return h, nil
}

// decodeToken reads the optional token field that follows the name.
func decodeToken(b []byte) ([]byte, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if len(b) < tokenLenLen {
		return nil, fmt.Errorf("%w: %d byte after the name", ErrMalformed, len(b))
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

// HelloOK accepts a session: the largest frame the broker accepts, and the
// producer's epoch: the one its HELLO gave, or, for a HELLO of epoch 0, the
// new one the broker assigned and stored (which fenced every older
// incarnation of the name, on every topic).
//
//	+--------------+-----------+
//	| u32 maxFrame | u64 epoch |
//	+--------------+-----------+
type HelloOK struct {
	MaxFrameSize uint32 // DecodeHelloOK rejects values below MinMaxFrameSize
	Epoch        uint64 // at least 1
}

// AppendHelloOK appends a HELLO_OK frame to dst. It encodes the fields as
// given; a MaxFrameSize below MinMaxFrameSize or an Epoch of 0 makes a
// frame the peer will reject. It allocates only if dst lacks capacity.
func AppendHelloOK(dst []byte, h HelloOK) []byte {
	dst = appendHeader(dst, TypeHelloOK, helloOKLen)
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
		MaxFrameSize: binary.BigEndian.Uint32(b),
		Epoch:        binary.BigEndian.Uint64(b[4:]),
	}
	if h.MaxFrameSize < MinMaxFrameSize {
		return HelloOK{}, fmt.Errorf("%w: max frame size %d below %d", ErrMalformed, h.MaxFrameSize, MinMaxFrameSize)
	}
	if h.Epoch == 0 {
		return HelloOK{}, fmt.Errorf("%w: epoch 0", ErrMalformed)
	}
	return h, nil
}

// Topic declares a topic for the rest of the connection: BATCH frames and
// receipts name it by ID. The producer picks the ids and keeps one per
// topic for the life of the connection; it may declare a topic again under
// the same id and name (it forgot the idle topic and asks where its
// sequence ids go on). The broker answers with TOPIC_OK (the topic's last
// sequence id for this producer, stored or queued on the connection) or
// TOPIC_ERROR (refused; the connection goes on). The producer may send the
// topic's BATCH frames only after its TOPIC_OK.
//
//	+--------+---------+-------+
//	| u32 id | u8 tlen | topic |
//	+--------+---------+-------+
type Topic struct {
	ID   uint32
	Name string // see CheckTopic
}

// AppendTopic appends a TOPIC frame to dst. It returns dst unchanged and an
// error wrapping ErrMalformed if the name fails CheckTopic. It allocates
// only if dst lacks capacity.
func AppendTopic(dst []byte, t Topic) ([]byte, error) {
	if err := CheckTopic(t.Name); err != nil {
		return dst, err
	}
	dst = appendHeader(dst, TypeTopic, 4+1+len(t.Name))
	dst = binary.BigEndian.AppendUint32(dst, t.ID)
	dst = append(dst, byte(len(t.Name)))
	return append(dst, t.Name...), nil
}

// DecodeTopic decodes a TOPIC frame; the name must pass CheckTopic. It
// allocates the name.
func DecodeTopic(frame []byte) (Topic, error) {
	b, err := body(frame, TypeTopic)
	if err != nil {
		return Topic{}, err
	}
	if len(b) < 5 {
		return Topic{}, checkLen(TypeTopic, b, 5)
	}
	n := int(b[4])
	if err := checkLen(TypeTopic, b, 5+n); err != nil {
		return Topic{}, err
	}
	t := Topic{ID: binary.BigEndian.Uint32(b), Name: string(b[5:])}
	if err := CheckTopic(t.Name); err != nil {
		return Topic{}, err
	}
	return t, nil
}

// TopicOK accepts a topic declared by TOPIC: LastSeq is the highest
// sequence id stored, or queued to be stored on this connection, for
// (topic, producer); 0 if none.
//
//	+--------+-------------+
//	| u32 id | u64 lastSeq |
//	+--------+-------------+
type TopicOK struct {
	ID      uint32
	LastSeq uint64
}

// AppendTopicOK appends a TOPIC_OK frame to dst. It allocates only if dst
// lacks capacity.
func AppendTopicOK(dst []byte, t TopicOK) []byte {
	dst = appendHeader(dst, TypeTopicOK, topicOKLen)
	dst = binary.BigEndian.AppendUint32(dst, t.ID)
	return binary.BigEndian.AppendUint64(dst, t.LastSeq)
}

// DecodeTopicOK decodes a TOPIC_OK frame. It does not allocate on success.
func DecodeTopicOK(frame []byte) (TopicOK, error) {
	b, err := fixedBody(frame, TypeTopicOK, topicOKLen)
	if err != nil {
		return TopicOK{}, err
	}
	return TopicOK{ID: binary.BigEndian.Uint32(b), LastSeq: binary.BigEndian.Uint64(b[4:])}, nil
}

// TopicError refuses one topic of the connection, which goes on for its
// other topics: a topic the producer's identity may not write
// (CodeUnauthorized), one the store cannot take now (CodeStore,
// CodeStoreUnavailable), one the store refuses as a name (CodeProtocol).
// It refuses a declaration (the id is then free again: the producer may
// declare the topic anew, with the same id or another), or ends a declared
// topic whose store failed: frames queued for it are dropped, unacknowledged.
//
//	+--------+----------+------+
//	| u32 id | u16 code | text |
//	+--------+----------+------+
type TopicError struct {
	ID   uint32
	Code ErrorCode
	Text string // at most MaxErrorTextLen bytes on the wire
}

// AppendTopicError appends a TOPIC_ERROR frame to dst, its text cut as
// AppendError cuts it. It allocates only if dst lacks capacity.
func AppendTopicError(dst []byte, e TopicError) []byte {
	text := truncateText(e.Text)
	dst = appendHeader(dst, TypeTopicError, topicErrorLen+len(text))
	dst = binary.BigEndian.AppendUint32(dst, e.ID)
	dst = binary.BigEndian.AppendUint16(dst, uint16(e.Code))
	return append(dst, text...)
}

// DecodeTopicError decodes a TOPIC_ERROR frame. It accepts any code and
// returns ErrMalformed if the text exceeds MaxErrorTextLen bytes. It
// allocates the text.
func DecodeTopicError(frame []byte) (TopicError, error) {
	b, err := body(frame, TypeTopicError)
	if err != nil {
		return TopicError{}, err
	}
	if len(b) < topicErrorLen {
		return TopicError{}, checkLen(TypeTopicError, b, topicErrorLen)
	}
	if n := len(b) - topicErrorLen; n > MaxErrorTextLen {
		return TopicError{}, fmt.Errorf("%w: error text is %d bytes, limit %d", ErrMalformed, n, MaxErrorTextLen)
	}
	return TopicError{
		ID:   binary.BigEndian.Uint32(b),
		Code: ErrorCode(binary.BigEndian.Uint16(b[4:])),
		Text: string(b[topicErrorLen:]),
	}, nil
}

// Receipt acknowledges storage on one topic: every record of this producer
// on the topic declared as Topic, with a sequence id up to and including
// Seq, is stored. Receipts are cumulative per topic. One RECEIPT frame
// carries 1 to MaxReceiptEntries of them, at most one per topic:
//
//	+-----------------------------+
//	| n x (u32 topic | u64 seq)   |
//	+-----------------------------+
type Receipt struct {
	Topic uint32
	Seq   uint64
}

// AppendReceipt appends a RECEIPT frame of one entry to dst. It allocates
// only if dst lacks capacity.
func AppendReceipt(dst []byte, r Receipt) []byte {
	dst = appendHeader(dst, TypeReceipt, receiptEntry)
	dst = binary.BigEndian.AppendUint32(dst, r.Topic)
	return binary.BigEndian.AppendUint64(dst, r.Seq)
}

// AppendReceipts appends a RECEIPT frame of the entries rs (1 to
// MaxReceiptEntries; the caller keeps one per topic) to dst. It allocates
// only if dst lacks capacity.
func AppendReceipts(dst []byte, rs []Receipt) []byte {
	dst = appendHeader(dst, TypeReceipt, receiptEntry*len(rs))
	for _, r := range rs {
		dst = binary.BigEndian.AppendUint32(dst, r.Topic)
		dst = binary.BigEndian.AppendUint64(dst, r.Seq)
	}
	return dst
}

// DecodeReceipts decodes a RECEIPT frame, appending its entries to dst. It
// returns ErrMalformed for a body that is not 1 to MaxReceiptEntries
// entries. It allocates only if dst lacks capacity.
func DecodeReceipts(frame []byte, dst []Receipt) ([]Receipt, error) {
	b, err := body(frame, TypeReceipt)
	if err != nil {
		return dst, err
	}
	n := len(b) / receiptEntry
	if len(b)%receiptEntry != 0 || n == 0 || n > MaxReceiptEntries {
		return dst, fmt.Errorf("%w: RECEIPT body of %d bytes", ErrMalformed, len(b))
	}
	for ; len(b) > 0; b = b[receiptEntry:] {
		dst = append(dst, Receipt{Topic: binary.BigEndian.Uint32(b), Seq: binary.BigEndian.Uint64(b[4:])})
	}
	return dst, nil
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
