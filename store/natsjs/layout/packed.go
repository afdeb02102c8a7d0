package layout

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/wire"
)

// packedVersion is the first byte of a packed body.
const packedVersion = 1

// Flags of one record in a packed body.
const (
	flagKey       = 1 << 0
	flagEventTime = 1 << 1
	flagHeaders   = 1 << 2
	flagsKnown    = flagKey | flagEventTime | flagHeaders
)

// The packed body, all integers uvarint unless said otherwise:
//
//	version (one byte, 1) | count | record * count
//	record = seq | flags (one byte) | [event time] | [key] | [headers] | payload
//
// seq is the first record's sequence ID, then the difference to the
// previous one (at least 1). The event time is a varint of Unix seconds and
// a uvarint of nanoseconds; key and payload are length and bytes; headers are
// a count, then per header the key and the value, each length and bytes.
// A flag bit says whether key, event time and headers are present; a
// present key or header value may be empty.

// PackedSize returns the size of recs in a packed body, version and count
// included.
func PackedSize(recs []broker.Record) int {
	n := 1 + uvarintLen(uint64(len(recs)))
	prev := uint64(0)
	for i := range recs {
		n += recordSize(prev, &recs[i])
		prev = recs[i].Seq
	}
	return n
}

// PackedFit returns how many leading records of recs fit in a packed body of
// at most limit bytes, at most maxRecords of them if maxRecords > 0, and the
// body's size. It returns 0 when not even recs[0] fits.
func PackedFit(recs []broker.Record, limit, maxRecords int) (n, size int) {
	// The count's length depends on the count: reserve the most it can take.
	size = 1 + binary.MaxVarintLen32
	prev := uint64(0)
	for i := range recs {
		if maxRecords > 0 && i == maxRecords {
			break
		}
		rs := recordSize(prev, &recs[i])
		if size+rs > limit {
			break
		}
		size += rs
		prev = recs[i].Seq
		n++
	}
	if n == 0 {
		return 0, 0
	}
	return n, size - binary.MaxVarintLen32 + uvarintLen(uint64(n))
}

func recordSize(prev uint64, r *broker.Record) int {
	n := uvarintLen(r.Seq-prev) + 1
	if !r.EventTime.IsZero() {
		n += varintLen(r.EventTime.Unix()) + uvarintLen(uint64(r.EventTime.Nanosecond()))
	}
	if r.Key != nil {
		n += uvarintLen(uint64(len(r.Key))) + len(r.Key)
	}
	if r.Headers != nil {
		n += headersSize(r.Headers)
	}
	return n + uvarintLen(uint64(len(r.Payload))) + len(r.Payload)
}

func headersSize(hs []wire.Header) int {
	n := uvarintLen(uint64(len(hs)))
	for _, h := range hs {
		n += uvarintLen(uint64(len(h.Key))) + len(h.Key) + uvarintLen(uint64(len(h.Value))) + len(h.Value)
	}
	return n
}

// AppendPacked appends the packed body of recs to dst and returns it. recs'
// sequence IDs must be strictly increasing (the store checks it). The body
// holds copies of every slice: recs may be reused after the call.
func AppendPacked(dst []byte, recs []broker.Record) []byte {
	dst = append(dst, packedVersion)
	dst = binary.AppendUvarint(dst, uint64(len(recs)))
	prev := uint64(0)
	for i := range recs {
		r := &recs[i]
		dst = binary.AppendUvarint(dst, r.Seq-prev)
		prev = r.Seq
		var flags byte
		if r.Key != nil {
			flags |= flagKey
		}
		if !r.EventTime.IsZero() {
			flags |= flagEventTime
		}
		if r.Headers != nil {
			flags |= flagHeaders
		}
		dst = append(dst, flags)
		if flags&flagEventTime != 0 {
			dst = binary.AppendVarint(dst, r.EventTime.Unix())
			dst = binary.AppendUvarint(dst, uint64(r.EventTime.Nanosecond()))
		}
		if flags&flagKey != 0 {
			dst = appendBytes(dst, r.Key)
		}
		if flags&flagHeaders != 0 {
			dst = appendHeaders(dst, r.Headers)
		}
		dst = appendBytes(dst, r.Payload)
	}
	return dst
}

func appendHeaders(dst []byte, hs []wire.Header) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(hs)))
	for _, h := range hs {
		dst = binary.AppendUvarint(dst, uint64(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendBytes(dst, h.Value)
	}
	return dst
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func varintLen(v int64) int { return uvarintLen(uint64(v<<1) ^ uint64(v>>63)) }

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// DecodePacked calls fn for each record of a packed body, in order. The
// record's Payload, Key and header values are views into body (header keys
// are strings, copied); fn must copy what it keeps. It stops at fn's first
// error and returns it; a malformed body yields an error wrapping
// ErrMalformed, after fn saw the records before the fault.
func DecodePacked(body []byte, fn func(r broker.Record) error) error {
	d := decoder{b: body}
	if v := d.byte(); d.err == nil && v != packedVersion {
		return fmt.Errorf("%w: packed version %d", ErrMalformed, v)
	}
	count := d.uvarint()
	// Every record takes at least 3 bytes: refuse a count the body cannot
	// hold before trusting it.
	if d.err == nil && count > uint64(len(d.b))/3 {
		return fmt.Errorf("%w: %d records claimed in %d bytes", ErrMalformed, count, len(d.b))
	}
	var seq uint64
	for i := uint64(0); i < count && d.err == nil; i++ {
		delta := d.uvarint()
		if i > 0 && delta == 0 || delta > math.MaxUint64-seq {
			return fmt.Errorf("%w: record %d: sequence IDs not increasing", ErrMalformed, i)
		}
		seq += delta
		r := broker.Record{Seq: seq}
		flags := d.byte()
		if flags&^flagsKnown != 0 {
			return fmt.Errorf("%w: record %d: unknown flags %#x", ErrMalformed, i, flags)
		}
		if flags&flagEventTime != 0 {
			sec, nsec := d.varint(), d.uvarint()
			if nsec >= 1e9 {
				return fmt.Errorf("%w: record %d: nanoseconds %d", ErrMalformed, i, nsec)
			}
			r.EventTime = time.Unix(sec, int64(nsec))
		}
		if flags&flagKey != 0 {
			r.Key = d.bytes()
			if r.Key == nil {
				r.Key = []byte{}
			}
		}
		if flags&flagHeaders != 0 {
			r.Headers = d.headers()
		}
		r.Payload = d.bytes()
		if d.err != nil {
			break
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: %d bytes after the last record", ErrMalformed, len(d.b))
	}
	return nil
}

// decoder reads a packed encoding; the first fault sticks in err.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated or bad %s", ErrMalformed, what)
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.fail("byte")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// bytes returns a length-prefixed view (full slice expression: appending to
// it cannot overwrite the body).
func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("length")
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) headers() []wire.Header {
	n := d.uvarint()
	// A header takes at least 2 bytes.
	if d.err == nil && n > uint64(len(d.b))/2 {
		d.fail("header count")
	}
	if d.err != nil {
		return nil
	}
	hs := make([]wire.Header, 0, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		k := d.bytes()
		v := d.bytes()
		if v == nil {
			v = []byte{}
		}
		hs = append(hs, wire.Header{Key: string(k), Value: v})
	}
	return hs
}
