package layout

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"time"

	"github.com/inflightmq/inflight/broker"
)

// Header names. A header map is read by exact key (NATS headers are not
// canonicalized on the wire).
const (
	HdrLayout    = "Inflight-Layout"     // Packed or PerRecord
	HdrFirstSeq  = "Inflight-First-Seq"  // packed: the first record's sequence ID
	HdrLastSeq   = "Inflight-Last-Seq"   // every message: the highest sequence ID it holds
	HdrSeq       = "Inflight-Seq"        // per-record: the record's sequence ID
	HdrKey       = "Inflight-Key"        // per-record: the key, standard base64
	HdrEventTime = "Inflight-Event-Time" // per-record: RFC 3339 with nanoseconds, UTC
	HdrHeaders   = "Inflight-Headers"    // per-record: the headers, packed encoding in standard base64
)

// Values of HdrLayout.
const (
	Packed    = "packed/1"
	PerRecord = "record/1"
)

// SetPackedHeaders sets the headers of a packed message holding records
// first..last.
func SetPackedHeaders(h map[string][]string, first, last uint64) {
	h[HdrLayout] = []string{Packed}
	h[HdrFirstSeq] = []string{strconv.FormatUint(first, 10)}
	h[HdrLastSeq] = []string{strconv.FormatUint(last, 10)}
}

// SetRecordHeaders sets the headers of a per-record message holding r (its
// payload is the message's data). It fails with ErrEventTime for an event
// time RFC 3339 cannot write.
func SetRecordHeaders(h map[string][]string, r *broker.Record) error {
	seq := []string{strconv.FormatUint(r.Seq, 10)}
	h[HdrLayout] = []string{PerRecord}
	h[HdrSeq] = seq
	h[HdrLastSeq] = seq
	if r.Key != nil {
		h[HdrKey] = []string{base64.StdEncoding.EncodeToString(r.Key)}
	}
	if !r.EventTime.IsZero() {
		if y := r.EventTime.UTC().Year(); y < 0 || y > 9999 {
			return fmt.Errorf("%w: %v", ErrEventTime, r.EventTime)
		}
		h[HdrEventTime] = []string{r.EventTime.UTC().Format(time.RFC3339Nano)}
	}
	if r.Headers != nil {
		b := appendHeaders(make([]byte, 0, headersSize(r.Headers)), r.Headers)
		h[HdrHeaders] = []string{base64.StdEncoding.EncodeToString(b)}
	}
	return nil
}

// RecordHeadersSize returns about how many bytes SetRecordHeaders adds to a
// message's header block for r (an upper bound, for size limits).
func RecordHeadersSize(r *broker.Record) int {
	n := 160 // names, layout, sequence IDs, separators
	if r.Key != nil {
		n += base64.StdEncoding.EncodedLen(len(r.Key)) + 20
	}
	if !r.EventTime.IsZero() {
		n += 60
	}
	if r.Headers != nil {
		n += base64.StdEncoding.EncodedLen(headersSize(r.Headers)) + 20
	}
	return n
}

// LastSeq returns the HdrLastSeq of a message.
func LastSeq(h map[string][]string) (uint64, error) {
	return seqHeader(h, HdrLastSeq)
}

func seqHeader(h map[string][]string, name string) (uint64, error) {
	v := h[name]
	if len(v) == 0 {
		return 0, fmt.Errorf("%w: no %s header", ErrMalformed, name)
	}
	n, err := strconv.ParseUint(v[0], 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%w: %s %q", ErrMalformed, name, v[0])
	}
	return n, nil
}

// DecodeMessage calls fn for each record of a stored message (headers h,
// data), in order, whatever its layout; the views are as in DecodePacked.
// A packed body must match its HdrFirstSeq and HdrLastSeq. It returns fn's
// first error, or an error wrapping ErrMalformed.
func DecodeMessage(h map[string][]string, data []byte, fn func(r broker.Record) error) error {
	var kind string
	if v := h[HdrLayout]; len(v) > 0 {
		kind = v[0]
	}
	switch kind {
	case Packed:
		first, err := seqHeader(h, HdrFirstSeq)
		if err != nil {
			return err
		}
		last, err := seqHeader(h, HdrLastSeq)
		if err != nil {
			return err
		}
		n, prev := 0, uint64(0)
		err = DecodePacked(data, func(r broker.Record) error {
			if n == 0 && r.Seq != first {
				return fmt.Errorf("%w: first record %d, header says %d", ErrMalformed, r.Seq, first)
			}
			n++
			prev = r.Seq
			return fn(r)
		})
		if err != nil {
			return err
		}
		if n == 0 || prev != last {
			return fmt.Errorf("%w: last record %d, header says %d", ErrMalformed, prev, last)
		}
		return nil
	case PerRecord:
		r, err := decodeRecord(h, data)
		if err != nil {
			return err
		}
		return fn(r)
	default:
		return fmt.Errorf("%w: %s %q", ErrMalformed, HdrLayout, kind)
	}
}

func decodeRecord(h map[string][]string, data []byte) (broker.Record, error) {
	seq, err := seqHeader(h, HdrSeq)
	if err != nil {
		return broker.Record{}, err
	}
	r := broker.Record{Seq: seq, Payload: data}
	if v := h[HdrKey]; len(v) > 0 {
		if r.Key, err = base64.StdEncoding.DecodeString(v[0]); err != nil {
			return broker.Record{}, fmt.Errorf("%w: %s: %v", ErrMalformed, HdrKey, err)
		}
	}
	if v := h[HdrEventTime]; len(v) > 0 {
		if r.EventTime, err = time.Parse(time.RFC3339Nano, v[0]); err != nil {
			return broker.Record{}, fmt.Errorf("%w: %s: %v", ErrMalformed, HdrEventTime, err)
		}
	}
	if v := h[HdrHeaders]; len(v) > 0 {
		b, err := base64.StdEncoding.DecodeString(v[0])
		if err != nil {
			return broker.Record{}, fmt.Errorf("%w: %s: %v", ErrMalformed, HdrHeaders, err)
		}
		d := decoder{b: b}
		r.Headers = d.headers()
		if d.err == nil && len(d.b) != 0 {
			d.fail("headers")
		}
		if d.err != nil {
			return broker.Record{}, fmt.Errorf("%s: %w", HdrHeaders, d.err)
		}
	}
	return r, nil
}
