package wire

import (
	"encoding/binary"
	"fmt"
	"time"
)

// A record in a BATCH's records block (protocol version 2) is a uvarint
// length len, a flags byte, then len bytes: the metadata the flags announce, in this order, and
// the payload, which runs to the record's end:
//
//	+-------------+-------+------------------+----------------------+---------------+---------+
//	| uvarint len | flags | key (flagKey)    | headers (flagHeaders)| time (flagTime)| payload |
//	+-------------+-------+------------------+----------------------+---------------+---------+
//	key:     uvarint n | n bytes                         (1 <= n <= MaxKeyLen)
//	headers: uvarint count | count x (uvarint kn | key | uvarint vn | value)
//	time:    i64 Unix nanoseconds, big-endian
//
// len does not count the flags byte, so a record without metadata costs
// exactly one byte more than in version 1: the flags byte, 0. Every length is the shortest uvarint, and a flag is set only for a
// field that is present (a key of at least one byte, at least one header), so
// a record has one spelling.
const (
	flagKey     = 1 << 0
	flagHeaders = 1 << 1
	flagTime    = 1 << 2
	knownFlags  = flagKey | flagHeaders | flagTime
)

// Limits of a record's metadata and of a topic name, checked by AppendHello,
// by the decoders before anything is allocated, and by core.Producer's
// SendAsync.
const (
	MaxTopicLen       = 255      // bytes of a topic name; at least 1
	MaxKeyLen         = 4 << 10  // bytes of a record key
	MaxHeaders        = 64       // headers per record
	MaxHeaderKeyLen   = 255      // bytes of a header key; at least 1
	MaxHeaderValueLen = 64 << 10 // bytes of a header value
)

// DefaultTopic is the topic of a producer that names none, and of every
// record a version 1 store file holds.
const DefaultTopic = "default"

// Record is a decoded record. Its slices, and the values of its headers,
// alias the records block it was read from.
type Record struct {
	Payload   []byte
	Key       []byte   // nil when absent
	Headers   []Header // nil when absent
	EventTime time.Time
}

// CheckTopic returns nil if topic is a valid topic name: 1 to MaxTopicLen
// bytes of ASCII letters, digits, '.', '_' and '-'. Otherwise it returns an
// error wrapping ErrMalformed that says why.
func CheckTopic(topic string) error {
	if len(topic) == 0 || len(topic) > MaxTopicLen {
		return fmt.Errorf("%w: topic of %d bytes, want 1 to %d", ErrMalformed, len(topic), MaxTopicLen)
	}
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: topic %q: byte %d (%q) is not a letter, digit, '.', '_' or '-'", ErrMalformed, topic, i, c)
		}
	}
	return nil
}

// CheckMeta returns the bytes the metadata takes in a record (0 for none),
// or an error wrapping ErrMetaLimit for metadata over a limit: a key over
// MaxKeyLen, more than MaxHeaders headers, a header key empty or over
// MaxHeaderKeyLen, a header value over MaxHeaderValueLen, or an event time
// outside the years 1678 to 2262 (what Unix nanoseconds can hold). It does
// not allocate unless it returns an error.
func CheckMeta(key []byte, headers []Header, eventTime time.Time) (int, error) {
	if len(key) == 0 && len(headers) == 0 && eventTime.IsZero() {
		return 0, nil
	}
	if len(key) > MaxKeyLen {
		return 0, fmt.Errorf("%w: key of %d bytes, limit %d", ErrMetaLimit, len(key), MaxKeyLen)
	}
	if len(headers) > MaxHeaders {
		return 0, fmt.Errorf("%w: %d headers, limit %d", ErrMetaLimit, len(headers), MaxHeaders)
	}
	for i := range headers {
		h := &headers[i]
		if len(h.Key) == 0 || len(h.Key) > MaxHeaderKeyLen {
			return 0, fmt.Errorf("%w: header %d: key of %d bytes, want 1 to %d", ErrMetaLimit, i, len(h.Key), MaxHeaderKeyLen)
		}
		if len(h.Value) > MaxHeaderValueLen {
			return 0, fmt.Errorf("%w: header %d (%q): value of %d bytes, limit %d", ErrMetaLimit, i, h.Key, len(h.Value), MaxHeaderValueLen)
		}
	}
	if !eventTime.IsZero() {
		// UnixNano is undefined out of its range: check that it round-trips.
		if y := eventTime.UTC().Year(); y < 1678 || y > 2262 || !time.Unix(0, eventTime.UnixNano()).Equal(eventTime) {
			return 0, fmt.Errorf("%w: event time %v outside the years 1678 to 2262", ErrMetaLimit, eventTime)
		}
	}
	return metaLen(key, headers, eventTime), nil
}

// metaLen is the size of the metadata fields of a record, flags byte not
// included.
func metaLen(key []byte, headers []Header, eventTime time.Time) int {
	n := 0
	if len(key) > 0 {
		n += uvarintLen(uint64(len(key))) + len(key)
	}
	if len(headers) > 0 {
		n += uvarintLen(uint64(len(headers)))
		for i := range headers {
			n += uvarintLen(uint64(len(headers[i].Key))) + len(headers[i].Key) + uvarintLen(uint64(len(headers[i].Value))) + len(headers[i].Value)
		}
	}
	if !eventTime.IsZero() {
		n += 8
	}
	return n
}

// appendMeta appends the flags byte and the metadata fields of a record.
func appendMeta(dst []byte, key []byte, headers []Header, eventTime time.Time) []byte {
	var flags byte
	if len(key) > 0 {
		flags |= flagKey
	}
	if len(headers) > 0 {
		flags |= flagHeaders
	}
	if !eventTime.IsZero() {
		flags |= flagTime
	}
	dst = append(dst, flags)
	if flags&flagKey != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(key)))
		dst = append(dst, key...)
	}
	if flags&flagHeaders != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(headers)))
		for i := range headers {
			dst = binary.AppendUvarint(dst, uint64(len(headers[i].Key)))
			dst = append(dst, headers[i].Key...)
			dst = binary.AppendUvarint(dst, uint64(len(headers[i].Value)))
			dst = append(dst, headers[i].Value...)
		}
	}
	if flags&flagTime != 0 {
		dst = binary.BigEndian.AppendUint64(dst, uint64(eventTime.UnixNano()))
	}
	return dst
}

// RecordReader parses records (as RecordIter.Next returns them) into
// Records, reusing its memory: after warm-up it allocates nothing, header
// keys included, as long as the header keys it sees repeat (it keeps up to
// 256 distinct ones). It is not safe for concurrent use. The zero value is
// ready.
type RecordReader struct {
	headers []Header
	keys    map[string]string
}

// maxInterned bounds the header keys a RecordReader keeps.
const maxInterned = 256

// Reset makes the reader reuse the header memory of earlier records: the
// Headers of Records read before Reset may be overwritten.
func (rr *RecordReader) Reset() {
	clear(rr.headers)
	rr.headers = rr.headers[:0]
}

// Read parses one record. Payload, Key and header values alias rec;
// Headers stays valid until Reset. Errors wrap ErrMalformed: unknown flags,
// a length that is not the shortest uvarint or runs past the record, a field
// over its limit (checked before anything is allocated), or a flag set for
// an empty field.
func (rr *RecordReader) Read(rec []byte) (Record, error) {
	if len(rec) == 0 {
		return Record{}, fmt.Errorf("%w: record without its flags byte", ErrMalformed)
	}
	flags, p := rec[0], rec[1:]
	if flags&^knownFlags != 0 {
		return Record{}, fmt.Errorf("%w: record flags %#02x, known %#02x", ErrMalformed, flags, knownFlags)
	}
	var r Record
	if flags == 0 {
		r.Payload = p
		return r, nil
	}
	var err error
	if flags&flagKey != 0 {
		if r.Key, p, err = readField(p, "key", 1, MaxKeyLen); err != nil {
			return Record{}, err
		}
	}
	if flags&flagHeaders != 0 {
		n, k := binary.Uvarint(p)
		switch {
		case k <= 0 || k != uvarintLen(n):
			return Record{}, fmt.Errorf("%w: bad header count", ErrMalformed)
		case n == 0 || n > MaxHeaders:
			return Record{}, fmt.Errorf("%w: %d headers, want 1 to %d", ErrMalformed, n, MaxHeaders)
		case n*2 > uint64(len(p)-k): // each header takes at least its two length bytes
			return Record{}, fmt.Errorf("%w: %d headers in %d bytes", ErrMalformed, n, len(p)-k)
		}
		p = p[k:]
		start := len(rr.headers)
		for range n {
			var hk, hv []byte
			if hk, p, err = readField(p, "header key", 1, MaxHeaderKeyLen); err != nil {
				return Record{}, err
			}
			if hv, p, err = readField(p, "header value", 0, MaxHeaderValueLen); err != nil {
				return Record{}, err
			}
			rr.headers = append(rr.headers, Header{Key: rr.intern(hk), Value: hv})
		}
		end := len(rr.headers)
		r.Headers = rr.headers[start:end:end]
	}
	if flags&flagTime != 0 {
		if len(p) < 8 {
			return Record{}, fmt.Errorf("%w: event time runs past the record", ErrMalformed)
		}
		r.EventTime = time.Unix(0, int64(binary.BigEndian.Uint64(p)))
		p = p[8:]
	}
	r.Payload = p
	return r, nil
}

// PlainPayload returns the payload of a record (as RecordIter.Next returns
// it) and true if the record has no metadata; otherwise nil and false: read
// it with RecordReader.Read. It is the cheap path for the common record.
func PlainPayload(rec []byte) ([]byte, bool) {
	if len(rec) == 0 || rec[0] != 0 {
		return nil, false
	}
	return rec[1:], true
}

// readField reads a uvarint length in [lo, hi] and that many bytes.
func readField(p []byte, what string, lo, hi int) (field, rest []byte, err error) {
	n, k := binary.Uvarint(p)
	switch {
	case k <= 0 || k != uvarintLen(n):
		return nil, nil, fmt.Errorf("%w: bad %s length", ErrMalformed, what)
	case n < uint64(lo) || n > uint64(hi):
		return nil, nil, fmt.Errorf("%w: %s of %d bytes, want %d to %d", ErrMalformed, what, n, lo, hi)
	case n > uint64(len(p)-k):
		return nil, nil, fmt.Errorf("%w: %s of %d bytes, %d left", ErrMalformed, what, n, len(p)-k)
	}
	end := k + int(n)
	return p[k:end:end], p[end:], nil
}

// intern returns b as a string, from the reader's table when it is there:
// a record's header keys must be strings, and most batches repeat a few.
func (rr *RecordReader) intern(b []byte) string {
	if s, ok := rr.keys[string(b)]; ok { // no allocation: the compiler's map lookup by []byte
		return s
	}
	s := string(b)
	if rr.keys == nil {
		rr.keys = make(map[string]string)
	}
	if len(rr.keys) < maxInterned {
		rr.keys[s] = s
	}
	return s
}

// AppendRecordBody appends what follows a record's length in a batch: the
// flags byte, the metadata present and the payload. Its size is 1 + the
// metadata size CheckMeta returns + len(payload). RecordReader.Read parses
// it. For other formats that embed records (a store file); the metadata must
// be within the limits CheckMeta checks.
func AppendRecordBody(dst, payload, key []byte, headers []Header, eventTime time.Time) []byte {
	dst = appendMeta(dst, key, headers, eventTime)
	return append(dst, payload...)
}
