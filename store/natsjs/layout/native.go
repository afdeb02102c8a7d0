package layout

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/wire"
)

// Headers of the native layout (besides HdrSeq, HdrKey and HdrEventTime,
// which it shares with the per-record layout, in readable form).
const (
	// HdrProducer: the producer name (also the last token of the
	// record's subject). Native records written by earlier builds also
	// carried HdrEpoch, the writer's epoch, which readers skip; the epoch
	// is on the name's fence now.
	HdrProducer = "Inflight-Producer"
	HdrHeader   = "Inflight-Header" // native: a user header that cannot be a NATS header as it is
)

// B64 marks a header value that holds bytes which are not header text,
// in standard base64: "base64:" followed by the encoding.
const B64 = "base64:"

// AppendNativeHeaders appends to dst the header lines ("Key: value\r\n")
// of a native message holding r (its payload is the message's data),
// written by producer, in this order:
//
//	Inflight-Producer: svc-1
//	Inflight-Seq: 42
//	Inflight-Key: order-7                      (absent: no key; empty: an empty key)
//	Inflight-Event-Time: 2026-01-02T03:04:05.000000006Z
//	src: cli                                   (the user's headers, each as it is, in their order)
//
// The producer name is also the last token of the message's subject
// (PREFIX.<topic tokens>.<producer>).
//
// It writes neither the block's first line ("NATS/1.0") nor its closing
// empty line: the caller adds them around these and its own lines. A key
// or header value that is not header text (see Text) is written as B64 and
// its standard base64. A user header whose key cannot be a NATS header key
// as it is (not printable ASCII, a ':', or a name beginning with "Nats-"
// or "Inflight-", which the server and this package read) is written in
// its place as "Inflight-Header: " + the key's standard base64 + ":" + the
// value as above. Repeated keys stay repeated. It fails with ErrEventTime
// for an event time RFC 3339 cannot write.
func AppendNativeHeaders(dst []byte, producer string, r *broker.Record) ([]byte, error) {
	dst = append(dst, HdrProducer+": "...)
	dst = append(dst, producer...)
	dst = append(dst, "\r\n"...)
	dst = append(dst, HdrSeq+": "...)
	dst = strconv.AppendUint(dst, r.Seq, 10)
	dst = append(dst, "\r\n"...)
	if r.Key != nil {
		dst = appendTextLine(dst, HdrKey, r.Key)
	}
	if !r.EventTime.IsZero() {
		t := r.EventTime.UTC()
		if y := t.Year(); y < 0 || y > 9999 {
			return dst, fmt.Errorf("%w: %v", ErrEventTime, r.EventTime)
		}
		dst = append(dst, HdrEventTime+": "...)
		dst = t.AppendFormat(dst, time.RFC3339Nano)
		dst = append(dst, "\r\n"...)
	}
	for _, uh := range r.Headers {
		if plainKey(uh.Key) {
			dst = appendTextLine(dst, uh.Key, uh.Value)
			continue
		}
		dst = append(dst, HdrHeader+": "...)
		dst = base64.StdEncoding.AppendEncode(dst, []byte(uh.Key))
		dst = append(dst, ':')
		dst = appendTextValue(dst, uh.Value)
		dst = append(dst, "\r\n"...)
	}
	return dst, nil
}

func appendTextLine(dst []byte, key string, value []byte) []byte {
	dst = append(dst, key...)
	dst = append(dst, ": "...)
	dst = appendTextValue(dst, value)
	return append(dst, "\r\n"...)
}

// appendTextValue appends b as a header value: as it is if it is header
// text, else B64 and its standard base64.
func appendTextValue(dst, b []byte) []byte {
	if Text(b) {
		return append(dst, b...)
	}
	dst = append(dst, B64...)
	return base64.StdEncoding.AppendEncode(dst, b)
}

// Text reports whether b can be a NATS header value as it is and read back
// the same: valid UTF-8 without control characters, no space or tab at
// either end (header parsers trim them), and not beginning with B64.
func Text(b []byte) bool {
	if !utf8.Valid(b) || strings.HasPrefix(string(b), B64) {
		return false
	}
	for _, c := range string(b) {
		if c < ' ' || c == 0x7f {
			return false
		}
	}
	return len(b) == 0 || b[0] != ' ' && b[len(b)-1] != ' '
}

func fromValue(v string) ([]byte, error) {
	if s, ok := strings.CutPrefix(v, B64); ok {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %v", ErrMalformed, v, err)
		}
		return b, nil
	}
	return []byte(v), nil
}

// plainKey: a header key NATS clients carry as it is, and not one the
// server or this package reads.
func plainKey(k string) bool {
	if k == "" || reserved(k) {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c <= ' ' || c >= 0x7f || c == ':' {
			return false
		}
	}
	return true
}

func reserved(k string) bool {
	return len(k) >= 5 && strings.EqualFold(k[:5], "Nats-") || len(k) >= 9 && strings.EqualFold(k[:9], "Inflight-")
}

// native reports whether h is a native message's: an HdrSeq and no
// HdrLayout.
func native(h map[string][]string) bool {
	return len(h[HdrLayout]) == 0 && len(h[HdrSeq]) > 0
}

// Producer returns the HdrProducer of a native message; "" for other
// layouts, whose subject names the producer (as it does a native
// message's).
func Producer(h map[string][]string) string {
	if v := h[HdrProducer]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// decodeNative reads a native message. With fields nil (a message read
// through a client that gives a header map, which keeps the order of a
// repeated key's values, not of distinct keys), the user's headers come
// back with their keys in sorted order and each key's values in order;
// with fields (the header block as stored, see DecodeRaw), in the order
// they were written.
func decodeNative(h map[string][]string, fields []HeaderField, data []byte) (broker.Record, error) {
	seq, err := seqHeader(h, HdrSeq)
	if err != nil {
		return broker.Record{}, err
	}
	r := broker.Record{Seq: seq, Payload: data}
	if v := h[HdrKey]; len(v) > 0 {
		if r.Key, err = fromValue(v[0]); err != nil {
			return broker.Record{}, fmt.Errorf("%s: %w", HdrKey, err)
		}
	}
	if v := h[HdrEventTime]; len(v) > 0 {
		if r.EventTime, err = time.Parse(time.RFC3339Nano, v[0]); err != nil {
			return broker.Record{}, fmt.Errorf("%w: %s: %v", ErrMalformed, HdrEventTime, err)
		}
	}
	sorted := fields == nil
	if sorted {
		for k, vs := range h {
			for _, v := range vs {
				fields = append(fields, HeaderField{k, v})
			}
		}
	}
	var hs []wire.Header
	for _, f := range fields {
		uh, ok, err := userHeader(f)
		if err != nil {
			return broker.Record{}, err
		}
		if ok {
			hs = append(hs, uh)
		}
	}
	if sorted {
		// Stable: a repeated key keeps its values' order.
		slices.SortStableFunc(hs, func(a, b wire.Header) int { return strings.Compare(a.Key, b.Key) })
	}
	r.Headers = hs
	return r, nil
}

// userHeader returns the user's header a native message's field holds
// (ok false: the field is one the server or this package wrote).
func userHeader(f HeaderField) (wire.Header, bool, error) {
	if f.Key == HdrHeader {
		k64, val, ok := strings.Cut(f.Value, ":")
		k, err := base64.StdEncoding.DecodeString(k64)
		if !ok || err != nil {
			return wire.Header{}, false, fmt.Errorf("%w: %s %q", ErrMalformed, HdrHeader, f.Value)
		}
		b, err := fromValue(val)
		if err != nil {
			return wire.Header{}, false, fmt.Errorf("%s: %w", HdrHeader, err)
		}
		return wire.Header{Key: string(k), Value: b}, true, nil
	}
	if reserved(f.Key) {
		return wire.Header{}, false, nil
	}
	b, err := fromValue(f.Value)
	if err != nil {
		return wire.Header{}, false, fmt.Errorf("header %s: %w", f.Key, err)
	}
	return wire.Header{Key: f.Key, Value: b}, true, nil
}

// HeaderField is one "Key: value" line of a NATS header block.
type HeaderField struct{ Key, Value string }

// ParseHeaderBlock returns the fields of a NATS header block as stored
// ("NATS/1.0" and an optional status on the first line, then "Key: value"
// lines, each ending in CRLF, then an empty line), in order, each value
// without the spaces around it (as NATS clients read it). It fails with an
// error wrapping ErrMalformed for anything else.
func ParseHeaderBlock(b []byte) ([]HeaderField, error) {
	line, rest, ok := cutLine(b)
	if !ok || !strings.HasPrefix(line, "NATS/1.0") {
		return nil, fmt.Errorf("%w: a header block beginning %.20q", ErrMalformed, b)
	}
	var fields []HeaderField
	for {
		line, rest, ok = cutLine(rest)
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: a header block without its closing empty line", ErrMalformed)
		case line == "":
			if len(rest) != 0 {
				return nil, fmt.Errorf("%w: %d bytes after a header block", ErrMalformed, len(rest))
			}
			return fields, nil
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || k == "" {
			return nil, fmt.Errorf("%w: header line %q", ErrMalformed, line)
		}
		fields = append(fields, HeaderField{k, strings.Trim(v, " \t")})
	}
}

// cutLine cuts b at its first CRLF.
func cutLine(b []byte) (line string, rest []byte, ok bool) {
	i := strings.Index(string(b), "\r\n")
	if i < 0 {
		return "", nil, false
	}
	return string(b[:i]), b[i+2:], true
}

// DecodeRaw is DecodeMessage for a message's header block as stored (the
// "hdrs" of the JetStream message-get API, or what a client that reads
// the protocol itself gets) instead of a header map: a native record's
// headers come back in the order the producer gave them. It fails as
// DecodeMessage does, and for a header block ParseHeaderBlock refuses.
func DecodeRaw(hdr, data []byte, fn func(r broker.Record) error) error {
	var fields []HeaderField
	h := map[string][]string{}
	if len(hdr) > 0 {
		var err error
		if fields, err = ParseHeaderBlock(hdr); err != nil {
			return err
		}
		for _, f := range fields {
			h[f.Key] = append(h[f.Key], f.Value)
		}
	}
	if len(h[HdrLayout]) > 0 || !native(h) {
		return DecodeMessage(h, data, fn)
	}
	r, err := decodeNative(h, fields, data)
	if err != nil {
		return err
	}
	return fn(r)
}
