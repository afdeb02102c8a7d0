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
	HdrLayout    = "Inflight-Layout"     // Packed, PerRecord or Fence
	HdrFirstSeq  = "Inflight-First-Seq"  // packed: the first record's sequence ID
	HdrLastSeq   = "Inflight-Last-Seq"   // every message: the highest sequence ID it holds (a fence: the subject's, if any)
	HdrEpoch     = "Inflight-Epoch"      // fences, packed and per-record messages (native records before the fence alone said it): the epoch of the incarnation that wrote it
	HdrSeq       = "Inflight-Seq"        // per-record: the record's sequence ID
	HdrKey       = "Inflight-Key"        // per-record: the key, standard base64
	HdrEventTime = "Inflight-Event-Time" // per-record: RFC 3339 with nanoseconds, UTC
	HdrHeaders   = "Inflight-Headers"    // per-record: the headers, packed encoding in standard base64
)

// Values of HdrLayout.
const (
	Packed    = "packed/1"
	PerRecord = "record/1"
	Fence     = "fence/1" // no records: a producer name's new epoch
	Mark      = "mark/1"  // no records: the second message of a one-record write, for its fence check (never under the records' prefix)
)

// SetEpoch sets the HdrEpoch of a message written by the incarnation epoch
// of its producer name; epoch 0 (a writer that was never fenced in) sets
// nothing.
func SetEpoch(h map[string][]string, epoch uint64) {
	if epoch > 0 {
		h[HdrEpoch] = []string{strconv.FormatUint(epoch, 10)}
	}
}

// SetFenceHeaders sets the headers of a fence message: the new epoch of
// its subject's producer name, and the highest sequence ID the subject
// held when it was written (0: none, and no HdrLastSeq).
func SetFenceHeaders(h map[string][]string, epoch, last uint64) {
	h[HdrLayout] = []string{Fence}
	SetEpoch(h, epoch)
	if last > 0 {
		h[HdrLastSeq] = []string{strconv.FormatUint(last, 10)}
	}
}

// Tail returns what the last message of a subject says of its producer
// name: the highest sequence ID stored (HdrLastSeq; a fence without one
// says 0) and the epoch (HdrEpoch; 0 when absent, as in native records
// written now, whose epoch is their name's fence's, and the messages of a
// writer that was never fenced in). A fence message without an epoch is
// malformed.
func Tail(h map[string][]string) (last, epoch uint64, err error) {
	if v := h[HdrEpoch]; len(v) > 0 {
		if epoch, err = strconv.ParseUint(v[0], 10, 64); err != nil || epoch == 0 {
			return 0, 0, fmt.Errorf("%w: %s %q", ErrMalformed, HdrEpoch, v[0])
		}
	}
	if v := h[HdrLayout]; len(v) > 0 && v[0] == Fence {
		if epoch == 0 {
			return 0, 0, fmt.Errorf("%w: a fence without %s", ErrMalformed, HdrEpoch)
		}
		if len(h[HdrLastSeq]) == 0 {
			return 0, epoch, nil
		}
	}
	if last, err = LastSeq(h); err != nil {
		return 0, 0, err
	}
	return last, epoch, nil
}

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

// LastSeq returns the HdrLastSeq of a message, or a native message's
// HdrSeq.
func LastSeq(h map[string][]string) (uint64, error) {
	if native(h) {
		return seqHeader(h, HdrSeq)
	}
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
// data), in order, whatever its layout (native, packed, per-record); the views are as in DecodePacked.
// A fence message holds no record: fn is not called. A packed body must
// match its HdrFirstSeq and HdrLastSeq. It returns fn's first error, or an
// error wrapping ErrMalformed.
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
	case Mark:
		return nil
	case Fence:
		if _, _, err := Tail(h); err != nil {
			return err
		}
		if len(data) != 0 {
			return fmt.Errorf("%w: a fence with %d bytes of data", ErrMalformed, len(data))
		}
		return nil
	case "":
		if !native(h) {
			return fmt.Errorf("%w: neither %s nor %s", ErrMalformed, HdrLayout, HdrSeq)
		}
		r, err := decodeNative(h, nil, data)
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
