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

// Headers of the native layout (besides HdrSeq, HdrEpoch, HdrKey and
// HdrEventTime, which it shares with the per-record layout, in readable
// form).
const (
	HdrProducer = "Inflight-Producer" // native: the producer name
	HdrHeader   = "Inflight-Header"   // native: a user header that cannot be a NATS header as it is
)

// B64 marks a header value that holds bytes which are not header text,
// in standard base64: "base64:" followed by the encoding.
const B64 = "base64:"

// SetNativeHeaders sets the headers of a native message holding r (its
// payload is the message's data), written by producer at epoch (0: none):
//
//	Inflight-Producer: svc-1
//	Inflight-Seq: 42
//	Inflight-Epoch: 3
//	Inflight-Key: order-7                      (absent: no key; empty: an empty key)
//	Inflight-Event-Time: 2026-01-02T03:04:05.000000006Z
//	src: cli                                   (each user header as it is)
//
// A key or header value that is not header text (see Text) is written as
// B64 and its standard base64. A user header whose key cannot be a NATS
// header key as it is (not printable ASCII, a ':', or a name beginning with
// "Nats-" or "Inflight-", which the server and this package read) is
// written as "Inflight-Header: " + the key's standard base64 + ":" + the
// value as above. Repeated keys are kept in order. It fails with
// ErrEventTime for an event time RFC 3339 cannot write.
func SetNativeHeaders(h map[string][]string, producer string, epoch uint64, r *broker.Record) error {
	h[HdrProducer] = []string{producer}
	h[HdrSeq] = []string{strconv.FormatUint(r.Seq, 10)}
	SetEpoch(h, epoch)
	if r.Key != nil {
		h[HdrKey] = []string{textValue(r.Key)}
	}
	if !r.EventTime.IsZero() {
		if y := r.EventTime.UTC().Year(); y < 0 || y > 9999 {
			return fmt.Errorf("%w: %v", ErrEventTime, r.EventTime)
		}
		h[HdrEventTime] = []string{r.EventTime.UTC().Format(time.RFC3339Nano)}
	}
	for _, uh := range r.Headers {
		if plainKey(uh.Key) {
			h[uh.Key] = append(h[uh.Key], textValue(uh.Value))
			continue
		}
		h[HdrHeader] = append(h[HdrHeader], base64.StdEncoding.EncodeToString([]byte(uh.Key))+":"+textValue(uh.Value))
	}
	return nil
}

// NativeHeadersSize returns about how many bytes SetNativeHeaders adds to
// a message's header block for r (an upper bound, for size limits).
func NativeHeadersSize(producer string, r *broker.Record) int {
	n := 120 + len(producer)
	if r.Key != nil {
		n += len(B64) + base64.StdEncoding.EncodedLen(len(r.Key)) + 20
	}
	if !r.EventTime.IsZero() {
		n += 60
	}
	for _, uh := range r.Headers {
		n += len(HdrHeader) + base64.StdEncoding.EncodedLen(len(uh.Key)) + len(B64) + base64.StdEncoding.EncodedLen(len(uh.Value)) + 6
	}
	return n
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

func textValue(b []byte) string {
	if Text(b) {
		return string(b)
	}
	return B64 + base64.StdEncoding.EncodeToString(b)
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

// Producer returns the producer name of a native message ("" for other
// layouts, whose subject names the producer).
func Producer(h map[string][]string) string {
	if v := h[HdrProducer]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// decodeNative reads a native message. The user's headers come back with
// their keys in sorted order (a NATS header is a map: it keeps the order of
// a repeated key's values, not the order of distinct keys) and each key's
// values in order.
func decodeNative(h map[string][]string, data []byte) (broker.Record, error) {
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
	var hs []wire.Header
	for k, vs := range h {
		if reserved(k) {
			continue
		}
		for _, v := range vs {
			b, err := fromValue(v)
			if err != nil {
				return broker.Record{}, fmt.Errorf("header %s: %w", k, err)
			}
			hs = append(hs, wire.Header{Key: k, Value: b})
		}
	}
	for _, v := range h[HdrHeader] {
		k64, val, ok := strings.Cut(v, ":")
		k, err := base64.StdEncoding.DecodeString(k64)
		if !ok || err != nil {
			return broker.Record{}, fmt.Errorf("%w: %s %q", ErrMalformed, HdrHeader, v)
		}
		b, err := fromValue(val)
		if err != nil {
			return broker.Record{}, fmt.Errorf("%s: %w", HdrHeader, err)
		}
		hs = append(hs, wire.Header{Key: string(k), Value: b})
	}
	// Stable: a repeated key keeps its values' order.
	slices.SortStableFunc(hs, func(a, b wire.Header) int { return strings.Compare(a.Key, b.Key) })
	r.Headers = hs
	return r, nil
}
