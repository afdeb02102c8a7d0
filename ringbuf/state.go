package ringbuf

// State is the state of a slot for one position. A slot resolves exactly
// once: the only transitions out of Pending, Writing and Written lead to a
// resolved state, and only the consumer moves a resolved slot to Done.
//
//	          writer                 writer
//	Pending --------> Writing ----------------> Written --(writer: resend)--> Writing
//	   |                 |                         |
//	   |                 | writer: deadline,       | receipts: Acked (cursor)
//	   |                 | context, too large      | sweeper: Expired
//	   |                 v                         | context: Canceled
//	   |        Expired | Canceled | Rejected      | owner's Close: Closed
//	   |                                           | owner gives up: Aborted
//	   |                                           v
//	   +--(sweeper, context, Close, owner)--> Acked | Expired | Canceled |
//	                                          Closed | Rejected | Aborted
//	                                                     |
//	                                   dispatcher -------+--> Done --> released
//
// In inflight the writer is the pump, the receipts resolver runs on a
// transport goroutine, the sweeper and context.AfterFunc expire and cancel,
// Close fails what is left, the pump aborts what is pending when the broker
// refuses the producer for good, and the dispatcher delivers outcomes and
// moves out-of-order failures to Done. Writing is held only while the writer
// copies the value (the pump holds a run of up to 32 positions, copies them,
// then moves them on); resolvers that meet it wait for it to end (see
// Resolve), so the writer alone resolves a Writing slot.
//
// Two transitions are made for many positions at once, by a cursor, with
// no store to the slots: Writing to Written, when the writer moves its
// written cursor past a run it copied (see Ring.MarkWritten: a fresh
// write's Writing below it is Written to every reader of the state), and
// Written to Acked, when a receipt moves the acked cursor (see
// Ring.AckThrough: a Written position below it is Acked). A resend's
// Writing has a word of its own, so neither cursor changes a position
// while it is being copied again.
type State uint8

const (
	// Unpublished means the slot does not hold the position asked about: it
	// was claimed and not yet published, or it belongs to another position.
	Unpublished State = iota
	// Pending: published, waiting to be written.
	Pending
	// Writing: the writer is copying the value into a frame.
	Writing
	// Written: handed to a connection, waiting for a receipt.
	Written
	// Acked: the broker stored it; resolved as a success.
	Acked
	// Expired: its deadline passed before it was acknowledged.
	Expired
	// Canceled: its context ended before it was acknowledged.
	Canceled
	// Closed: the owner closed before it was acknowledged.
	Closed
	// Rejected: the owner refused it (for example, too large for the peer).
	Rejected
	// Aborted: the owner gave up on it before its deadline (for example,
	// the peer refused the owner for good).
	Aborted
	// Done: its outcome was delivered; it waits for head to pass it.
	Done
)

// rewriting is the word of a Written position the writer took back to
// write it again (a resend): State reports it as Writing. Its own word, so
// that the written cursor (see Ring.MarkWritten), which makes a fresh
// write's Writing Written, cannot make it Written while it is copied.
const rewriting = Done + 1

const (
	stateBits = 4
	stateMask = 1<<stateBits - 1
)

// Failed reports whether s is a failed outcome.
func (s State) Failed() bool { return s > Acked && s < Done }

// Final reports whether s can no longer change except to Done or by release.
func (s State) Final() bool { return s >= Acked }

var stateNames = [...]string{"unpublished", "pending", "writing", "written", "acked", "expired", "canceled", "closed", "rejected", "aborted", "done"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "invalid"
}

// word packs a position and a state. The stamp is pos+1, so that the zero
// word of a fresh slot matches no position and slots need no initialization.
func word(pos uint64, s State) uint64 { return stamp(pos)<<stateBits | uint64(s) }

func stamp(pos uint64) uint64 { return (pos + 1) & posMask }
