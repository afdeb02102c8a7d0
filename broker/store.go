package broker

import (
	"time"

	"github.com/inflightmq/inflight/wire"
)

// Store decides when a record counts as stored. The broker acknowledges
// records only after Append returned nil. Sequence IDs, and so
// deduplication, are per (topic, producer).
//
// Append may block: for an fsync, a replicated write, a network round trip.
// The broker never calls the Store on a transport's goroutine: each
// session appends from a goroutine of its own, so a slow Append holds up
// its own connection's receipts and nothing else. It calls Append and
// LastSeq for a (topic, producer) from one goroutine at a time; calls for
// different pairs run concurrently, and a Store that commits concurrent
// Appends together (one write, one fsync) serves many producers at the
// cost of one. One Append carries every record of that producer that
// arrived while its previous Append ran, from one or several frames.
type Store interface {
	// LastSeq returns the highest sequence ID stored for (topic, producer), or 0.
	LastSeq(topic, producer string) (uint64, error)
	// Append stores recs for (topic, producer). recs[i].Seq are strictly increasing (gaps possible), recs[0].Seq > LastSeq.
	// Slices are views valid only during the call; a store that keeps them must copy.
	Append(topic, producer string, recs []Record) error
}

// Record is one record as a Store sees it: the sequence ID the producer
// assigned, the payload and its metadata. Records handed to a Store are views
// into the broker's frame buffer, valid only during the call; a store that
// keeps them must copy every slice (and the header values; header keys are
// ordinary strings and may be kept).
type Record struct {
	Seq       uint64
	Payload   []byte
	Key       []byte        // nil when the producer set none
	Headers   []wire.Header // ordered; keys may repeat; nil when none
	EventTime time.Time     // zero when the producer set none
	// Raw is the record as it arrived in its BATCH frame: its flags byte,
	// its metadata and its payload, which the fields above are read from
	// (the wire record body, see wire.AppendRecordBody). A store whose
	// format holds records as the wire does may write Raw as it is
	// instead of encoding the fields again. nil for a Record that did not
	// come from a frame; a store then encodes the fields.
	Raw []byte
}

// stream names the sequence of records of one producer on one topic: the
// unit of deduplication.
type stream struct{ topic, producer string }
