package broker

import (
	"time"

	"github.com/inflightmq/inflight/wire"
)

// Store decides when a record counts as stored. The broker acknowledges
// records only after Append returned nil. Sequence IDs, and so
// deduplication, are per (topic, producer); fencing is per producer name,
// across all its topics.
//
// A Store keeps, per producer name, the epoch of the name's newest
// incarnation (see Fence): the broker gives every new Producer instance of a
// name an epoch one above the stored one, and the Store refuses the writes
// of every lower epoch on every topic of that name from then on. That
// check in the Store, not a broker's memory, is what keeps one writer per
// name across broker restarts and between brokers that share a Store
// (gateways on one JetStream stream): an older incarnation's Append that
// races a newer one's Fence either lands before the fence (and the newer
// incarnation continues after it) or is refused.
//
// Any method may block: for an fsync, a replicated write, a network round
// trip. The broker never calls the Store on a transport's goroutine: a
// session calls it from goroutines of its own, so a slow call holds up the
// topic (or, for Fence, the HELLO) it serves and nothing else. It calls
// State and Append for a (topic, producer) from one goroutine at a time;
// calls for different pairs, of one session or several, run concurrently,
// and a Store that commits concurrent Appends together (one write, one
// fsync) serves many topics and producers at the cost of one. One Append
// carries every record of that (topic, producer) that arrived while its
// previous Append ran, from one or several frames.
type Store interface {
	// State returns, for (topic, producer): LastSeq, the highest sequence
	// ID stored on that topic (0: none); Epoch, the producer name's newest
	// epoch across all topics (0: never fenced).
	State(topic, producer string) (NameState, error)
	// Fence makes epoch the epoch of the producer name (every topic,
	// including topics it never wrote), durably before it returns, if it
	// is above the stored one; from then on Append refuses every lower
	// epoch on every topic of that name. It refuses, storing nothing, with
	// an error wrapping ErrFenced when the stored epoch is epoch or above
	// (another broker fenced first).
	Fence(producer string, epoch uint64) error
	// Append stores recs for (topic, producer), written by the incarnation
	// epoch. recs[i].Seq are strictly increasing (gaps possible),
	// recs[0].Seq > the stored last sequence ID of (topic, producer). It
	// refuses with an error wrapping ErrFenced, storing nothing, when the
	// name's stored epoch is above epoch. Slices are views valid only
	// during the call; a store that keeps them must copy.
	Append(topic, producer string, epoch uint64, recs []Record) error
}

// NameState is what a Store says of one (topic, producer name): the
// topic's last stored sequence ID and the name's epoch.
type NameState struct {
	LastSeq uint64 // the highest sequence ID stored on the topic; 0: none
	Epoch   uint64 // the name's newest incarnation (see Store.Fence), over all topics; 0: never fenced
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
