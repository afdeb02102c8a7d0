package broker

import (
	"fmt"

	"github.com/inflightmq/inflight/wire"
)

// queuedFrame is one BATCH waiting in its topic's queue to be stored. A
// frame whose records are all queued or stored already has no buffer: it
// only asks for a receipt.
type queuedFrame struct {
	buf    *[]byte    // the broker pool's buffer holding batch.Data, or nil
	keep   func()     // or the release of the transport's frame holding batch.Data (HandleKeep)
	batch  wire.Batch // CodecNone, checked
	skip   int        // leading records queued or stored before
	heads  int        // headers of the frame's records, skipped ones included
	last   uint64     // the frame's last sequence ID
	charge int64      // what it holds of the broker's budget (see budget.go)
}

// hasRecords reports whether f holds records to store (not only a
// receipt to send).
func (f *queuedFrame) hasRecords() bool { return f.buf != nil || f.keep != nil }

// drop returns f's buffer (to the pool, or to the transport) and charge.
func (f *queuedFrame) drop(b *Broker) {
	if f.keep != nil {
		f.keep()
	}
	b.drop(f.buf, f.charge)
	*f = queuedFrame{}
}

// signal wakes the one waiter of c, if any, without blocking.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// batch checks a BATCH on the reader, copies its records block
// (decompressed) into a buffer of the broker's pool and queues it for its
// topic. A BATCH for an id not declared, or declared and not yet answered
// with TOPIC_OK, is a protocol error; one for a topic ended by a store
// error (TOPIC_ERROR sent, maybe not yet read) is dropped, unacknowledged.
func (s *Session) batch(frame []byte) error {
	b, err := wire.DecodeBatch(frame)
	if err != nil {
		return s.fail(fmt.Errorf("%w: %w", ErrProtocol, err))
	}
	t := s.topics[b.Topic]
	if t == nil {
		return s.fail(fmt.Errorf("%w: BATCH for topic id %d, which no TOPIC declared", ErrProtocol, b.Topic))
	}
	switch t.state.Load() {
	case topicDeclaring:
		return s.fail(fmt.Errorf("%w: BATCH for topic id %d (%q) before its TOPIC_OK", ErrProtocol, b.Topic, t.name))
	case topicEnded:
		return nil
	}
	last := b.LastSeq()
	if last <= t.queued {
		// Every record is stored or queued already (a resend): its
		// receipt follows the Append of what is queued, or comes now.
		if err := s.b.budget.acquire(frameIndex, budgetWait); err != nil {
			return s.fail(err)
		}
		return s.push(t, queuedFrame{batch: wire.Batch{Count: b.Count}, last: last, charge: frameIndex})
	}
	// The broker's frame memory is charged before a byte is copied or
	// decoded (see budget.go): a decompression bomb costs its share of it.
	charge, err := s.b.reserve(&b)
	if err != nil {
		return s.fail(err)
	}
	f := queuedFrame{last: last, charge: charge}
	switch {
	case b.Codec == wire.CodecNone && s.keep != nil:
		// The frame is ours until we release it (HandleKeep): b.Data, a
		// view into it, is queued as it is.
		f.keep, s.keep = s.keep, nil
	case b.Codec == wire.CodecNone:
		f.buf = s.b.bufs.get(int(b.RawLen))
		*f.buf = append((*f.buf)[:0], b.Data...)
		b.Data = *f.buf
	default:
		f.buf = s.b.bufs.get(int(b.RawLen))
		if b, _, err = b.Decompress(s.b.dec, (*f.buf)[:0]); err != nil {
			// Decoded within the frame limit, into the buffer charged for it.
			f.drop(s.b)
			return s.fail(fmt.Errorf("%w: %w", ErrProtocol, err))
		}
	}
	headers, err := checkRecords(&b, &s.check)
	if err != nil {
		f.drop(s.b)
		return s.fail(fmt.Errorf("%w: %w", ErrProtocol, err))
	}
	f.charge = s.b.refund(charge, &b, headers)
	f.batch, f.heads = b, headers
	if b.FirstSeq <= t.queued {
		f.skip = int(t.queued - b.FirstSeq + 1)
	}
	return s.push(t, f)
}

// checkRecords reads every record of a CodecNone batch with rr, so that a
// malformed one fails the session before anything of the batch is queued.
// It returns the number of headers.
func checkRecords(b *wire.Batch, rr *wire.RecordReader) (int, error) {
	it, err := b.Records()
	if err != nil {
		return 0, err
	}
	headers := 0
	for raw, ok := it.Next(); ok; raw, ok = it.Next() {
		if _, plain := wire.PlainPayload(raw); plain {
			continue
		}
		rr.Reset()
		r, err := rr.Read(raw)
		if err != nil {
			return 0, err
		}
		headers += len(r.Headers)
	}
	return headers, it.Err()
}
