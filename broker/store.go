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
// trip. The broker never calls them on a transport's reading goroutine: a
// session calls them from goroutines of its own, so a slow call holds up
// the topic (or, for State and Fence at HELLO, the HELLO and later HELLOs of
// that name) it serves and nothing else. It calls
// State and Append (or AppendFrames, see FrameAppender) for a (topic,
// producer) from one goroutine at a time;
// calls for different pairs, of one session or several, run concurrently,
// and a Store that commits concurrent Appends together (one write, one
// fsync) serves many topics and producers at the cost of one. One Append
// carries every record of that (topic, producer) that arrived while its
// previous Append ran, from one or several frames (Record.FrameStart
// marks where each begins).
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

// FrameAppender is implemented by a Store that can take records as the
// producer's frames carry them (store/file), so that the broker does not
// build a Record for each one and the Store does not read them back out of
// Records. When the Store implements it, the broker calls AppendFrames
// instead of Append, with the frames that arrived while the previous call
// ran; of a frame that begins with records stored or queued before (a
// resend after a reconnect), it hands over only the records after them.
//
// AppendFrames has Append's contract, errors and calling rules, for the
// records of frames in order: every frame's records (sequence IDs FirstSeq
// to FirstSeq+Count-1) are stored, or, with an error, none of the call's.
// Each frame's first sequence ID is above the last of the frame before it,
// and the first frame's above the stored last sequence ID of (topic,
// producer).
//
// A Store that wraps another must implement it only if the wrapped one
// does, and then pass it on. Note that a type embedding a store that has
// it (struct{ *file.Store }) has it too: if such a type overrides Append
// to see or change what is stored, it must override AppendFrames as well,
// or the broker goes around its Append.
type FrameAppender interface {
	AppendFrames(topic, producer string, epoch uint64, frames []Frame) error
}

// Frame is a producer frame's records as the wire carries them: Count
// records, of sequence IDs FirstSeq to FirstSeq+Count-1, in Records, the
// frame's records block or, after a resend, the part of it after the
// records stored or queued before (uncompressed: read it with
// wire.RecordIter, whose Next returns what Record.Raw would hold). The
// broker checked every record (its length, its metadata) before it handed
// the frame over. Records is a view into the frame's memory (the broker's
// buffer, or the transport's), valid only during the call.
type Frame struct {
	FirstSeq uint64
	Count    int
	Records  []byte
}

// Pinner is implemented by a Store that forgets idle producer names
// (store/file's ForgetProducersAfter). The broker pins the name of each
// live session that holds it, from just before its HELLO_OK until the
// session releases the name (it closes, or a newer session takes the name
// over: the pin passes to that one), so that a producer idle on a live
// connection (heartbeats only) is never forgotten. Pin and Unpin come in
// pairs; a name may be pinned more than once (Unpin undoes one Pin). Pin
// runs on a session's HELLO goroutine under the name's lock (as Fence
// does); Unpin under no lock, in Session.Close, on the goroutine that
// closes the session (a transport's, once its connection stopped
// reading). They should not block for long.
type Pinner interface {
	Pin(producer string)
	Unpin(producer string)
}

// NameState is what a Store says of one (topic, producer name): the
// topic's last stored sequence ID and the name's epoch.
type NameState struct {
	LastSeq uint64 // the highest sequence ID stored on the topic; 0: none
	Epoch   uint64 // the name's newest incarnation (see Store.Fence), over all topics; 0: never fenced
	// Forgotten says that the Store keeps nothing of the name and forgets
	// idle names (store/file's ForgetProducersAfter): it may have known
	// it. Epoch is then above every epoch the Store ever gave, so that an
	// incarnation it forgot is fenced when it comes back (never taken for
	// the newest, which would store its records a second time); the
	// broker tells it why.
	Forgotten bool
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
	// FrameStart is set on the first record the broker takes from each
	// producer frame (BATCH) it hands over; the records up to the next
	// one came in that frame. One Append may carry several frames: a
	// store that checksums what it writes can keep them apart, so that a
	// flipped bit costs one frame's records (store/file writes an entry per
	// frame). false on every record of a Record slice that did not come
	// from frames.
	FrameStart bool
}

// stream names the sequence of records of one producer on one topic: the
// unit of deduplication.
type stream struct{ topic, producer string }
