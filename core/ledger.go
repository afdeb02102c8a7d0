package core

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/inflightmq/inflight/ringbuf"
	"github.com/inflightmq/inflight/wire"
)

// ledger is the producer's book of every message it holds, from SendAsync
// until its callback ran: the ring with the cursors and queues beside it.
// It is the only place in core that moves a slot's state or a cursor; the
// pump, sweeper, dispatcher and session drive it.
//
// # Cursors
//
// Positions grow forever; a message's sequence ID is seqBase + pos + 1.
//
//	        released         live: at most MaxPending positions
//	|---------------------|------------------------------------------|
//	0                    head                                       tail
//	|-------- resolved --------|              (acked: anywhere <= maxWritten)
//	0                        acked
//	|------------ written at least once -----------|
//	0                                          maxWritten
//
// Invariants, and who moves what:
//   - head <= tail, tail-head <= MaxPending. tail: senders (claim, one
//     position or, for SendBatch, a run of them in one step); head:
//     the dispatcher (release), only past positions whose outcome it
//     delivered.
//   - acked <= maxWritten <= tail. acked is the ring's acked cursor
//     (ringbuf.Ring.AckThrough): every position below it is resolved or
//     released, but one the pump was writing again (a resend) when a
//     receipt covered it, which is Acked once the pump marks it Written
//     (and the pump tells its Send and the dispatcher: see resentBack).
//     acked may lag head (failures release positions without
//     acknowledging them) or lead it (acknowledged positions whose
//     callbacks have not run). acked: receipt resolvers (a transport
//     goroutine; forward only) and the handshake (the pump).
//   - Every position below maxWritten was handed to a connection once, or
//     resolved before it could be. maxWritten: the pump.
//   - seq(pos) = seqBase + pos + 1, modulo 2^64: seqBase is set by the
//     topic's first TOPIC_OK of each incarnation (the pump): the first,
//     before anything is written, and under WaitForName the one after the
//     name was taken back after a fence, when every position below
//     maxWritten is released; the positions from maxWritten on, never
//     written, then get sequence IDs after the topic's last stored one. seqBase may so be
//     "negative" (above 2^63): sequence IDs are below wire.MaxSeq, so the
//     difference of two, or of one and seqBase, read as an int64, is a
//     distance in positions.
//   - A position resolves exactly once (a CAS on its state, or for
//     acknowledgements the ring's acked cursor: see ackThrough); the
//     goroutine that resolved it settles it exactly once: a Send is
//     notified, a failure is queued for the dispatcher or the in-order
//     walk is woken.
//   - waits[pos] holds the waiter of a Send at a live pos until pos is
//     settled; the dispatcher does not release a Send's position before.
//     waits is made by the ledger's first Send: a topic written only by
//     SendAsync never pays for it.
//   - Every live position holds its share of the producer's budget (see
//     budget), taken by claim before the ring's and given back by walk
//     when the dispatcher releases it; but the positions of the
//     producer's first topic claimed while it was exempt (below
//     meterFrom), for which the budget holds the topic's share instead.
//
// A producer has one ledger per topic (see lane): sequence IDs, cursors and
// order are per topic. The dispatcher's and sweeper's wake-ups are the
// producer's, shared by its ledgers: wake tells the lane's owner which
// ledger has something for the dispatcher.
//
// Slot states and their transitions are drawn in ringbuf.State.
type ledger struct {
	ring    *ringbuf.Ring[entry]
	budget  *budget      // the producer's, shared by its ledgers
	timeout int64        // SendTimeout, ns
	coarse  *coarseClock // deadlines are stamped from it (see due); nil: from the precise clock
	wake    func()       // tells the dispatcher this ledger has something to deliver

	waits atomic.Pointer[[]atomic.Pointer[waiter]] // nil until the first Send

	seqBase    atomic.Uint64
	maxWritten atomic.Uint64

	// The exemption of the producer's first topic (see exemptFrom): while
	// exempt, its claims skip the producer's budget, which holds the
	// topic's whole share for them instead (shareHeld). meterFrom is the
	// first position charged to the budget message by message: 0 for a
	// ledger never exempt, exemptNow while exempt (see exempt), the ring's
	// tail at the moment it stopped being exempt after (see meter), when
	// the budget keeps of the share only what the exempt positions still
	// live may hold (keptN, keptBytes) until they are released.
	meterFrom  atomic.Uint64
	shareHeld  atomic.Bool
	keptN      atomic.Int64
	keptBytes  atomic.Int64
	shareN     int
	shareBytes int64

	// The dispatcher's (see walk): positions below counted are
	// counted in *ackedStat, the producer's Stats.Acked (nil: not counted).
	counted   uint64
	ackedStat *atomic.Uint64

	failMu sync.Mutex
	fails  []uint64 // failed positions for the dispatcher, out of order

	late      lateQueue     // positions that entered out of deadline order
	sweepWake chan struct{} // the producer's, capacity 1: the late queue has an earlier deadline
}

// entry is what the ring holds for one message. With the slot's state,
// deadline and size it is 64 bytes (entryFits), down from 88 when it kept
// the payload's slice header and the context and its stop func inline: a
// topic's ring costs 64 bytes a slot (an idle topic's page of 16: 1 KiB;
// Topics/idle=100000 measured 3646 bytes per idle topic, 4070 before),
// and a flat ring's block of 32768 slots 2 MiB.
type entry struct {
	msg  *Message
	data unsafe.Pointer // the payload's first byte as SendAsync found it (see payload)
	n    int            // the payload's length
	cb   Callback       // nil for a Send: its waiter is in ledger.waits
	hook *ctxHook       // nil when the context can never be done
}

// ctxHook is what an entry keeps of a context that can end.
type ctxHook struct {
	ctx  context.Context
	stop func() bool // stops ctx's AfterFunc
}

// payload returns the message's payload as SendAsync found it (the
// Message may not change until its callback, but Payload is read once).
func (e *entry) payload() []byte { return unsafe.Slice((*byte)(e.data), e.n) }

// ctx returns the message's context, or nil when it can never be done.
func (e *entry) ctx() context.Context {
	if e.hook == nil {
		return nil
	}
	return e.hook.ctx
}

// entryFits does not compile when a slot of entry is larger than 64 bytes.
const entryFits = uint(64 - unsafe.Sizeof(ringbuf.Slot[entry]{}))

// newLedger returns a ledger whose ring holds maxPending messages and
// maxBytes bytes (a topic's share), within budget b: a flat ring
// (ringbuf.NewFlat) if flat, else a paged one.
func newLedger(maxPending int, maxBytes int64, timeout time.Duration, coarse *coarseClock, b *budget, wake func(), sweepWake chan struct{}, flat bool) (*ledger, error) {
	newRing := ringbuf.New[entry]
	if flat {
		newRing = ringbuf.NewFlat[entry]
	}
	ring, err := newRing(maxPending, maxBytes)
	if err != nil {
		return nil, err
	}
	return &ledger{
		ring:       ring,
		shareN:     maxPending,
		shareBytes: maxBytes,
		budget:     b,
		timeout:    int64(timeout),
		coarse:     coarse,
		wake:       wake,
		sweepWake:  sweepWake,
	}, nil
}

// seq returns the sequence ID of pos.
func (l *ledger) seq(pos uint64) uint64 { return l.seqBase.Load() + pos + 1 }

// pending returns the live positions and their bytes.
func (l *ledger) pending() (int, int64) { return l.ring.Len(), l.ring.Bytes() }

// unackedNow returns the positions written and not yet resolved, counted
// from their states (for Stats: a receipt moves one cursor for a batch, and
// no count per message is kept beside it): a read of each position from
// resendFrom to maxWritten, the messages in flight, which are Written, or
// Writing while written again.
func (l *ledger) unackedNow() int {
	n := 0
	pg := l.ring.Pager()
	for pos, end := l.resendFrom(), l.maxWritten.Load(); pos < end; pos++ {
		if st := pg.State(pos); st == ringbuf.Written || st == ringbuf.Writing {
			n++
		}
	}
	return n
}

// bounds returns head and tail.
func (l *ledger) bounds() (uint64, uint64) { return l.ring.Head(), l.ring.Tail() }

// ---- senders ----

// claim claims room for a run of messages, sizes[i] bytes for the i-th
// (SendAsync's run is one message, SendBatch's up to 64): consecutive
// positions for as many as fit, in order (at least one unless it returns
// an error), with one step on the ring. When not even the first fits it
// returns ErrQueueFull, or, with block, waits for room as claimWait says
// and reports that it waited. ErrClosed after close.
func (l *ledger) claim(ctx context.Context, sizes []int64, d int64, block bool, now func() int64, newTimer func(time.Duration) (<-chan time.Time, func() bool)) (first uint64, n int, waited bool, err error) {
	first, n, err = l.tryClaim(sizes)
	if err == ringbuf.ErrFull && block {
		waited = true
		first, n, err = l.claimWait(ctx, sizes, d, now, newTimer)
	}
	if err != nil {
		return 0, 0, false, claimError(err)
	}
	return first, n, waited, nil
}

// claimError maps the ring's claim errors to the producer's.
func claimError(err error) error {
	switch err {
	case ringbuf.ErrFull:
		return ErrQueueFull
	case ringbuf.ErrClosed:
		return ErrClosed
	}
	return err
}

// tryClaim takes room in the producer's budget, then the ring's TryClaimN,
// or TryClaim for a single message, and gives back the budget of what the
// ring did not take.
func (l *ledger) tryClaim(sizes []int64) (uint64, int, error) {
	if l.exempt() {
		return l.tryClaimExempt(sizes)
	}
	if !l.ring.MayHaveRoom() && !l.ring.HasRoom(sizes[0]) {
		// The topic's share is full: refused before the budget is taken,
		// so that giving it back wakes no one (this claimer among them).
		if l.ring.Closed() {
			return 0, 0, ringbuf.ErrClosed
		}
		return 0, 0, ringbuf.ErrFull
	}
	if len(sizes) == 1 {
		if !l.budget.take(1, sizes[0]) {
			if l.ring.Closed() {
				return 0, 0, ringbuf.ErrClosed
			}
			return 0, 0, ringbuf.ErrFull
		}
		pos, err := l.ring.TryClaim(sizes[0])
		if err != nil {
			l.budget.give(1, sizes[0])
			return 0, 0, err
		}
		return pos, 1, nil
	}
	var total int64
	for _, s := range sizes {
		total += s
	}
	if !l.budget.take(len(sizes), total) {
		// The whole run does not fit: the first message alone may.
		return l.tryClaim(sizes[:1])
	}
	pos, n, err := l.ring.TryClaimN(sizes)
	taken := int64(0)
	if err == nil {
		for _, s := range sizes[:n] {
			taken += s
		}
	} else {
		n = 0
	}
	l.budget.give(len(sizes)-n, total-taken)
	return pos, n, err
}

// exemptFrom makes the ledger exempt from the producer's budget for its
// claims (see budget): the budget holds its whole share instead, which its
// ring's limits keep it within. For the producer's first topic, while it is
// the only one: its claims then cost one locked instruction less. The
// budget must hold nothing else (New calls it first), and there is no
// shared MemoryLimit (which counts every message of every producer).
func (l *ledger) exemptFrom() {
	l.budget.hold(l.shareN, l.shareBytes)
	l.keptN.Store(int64(l.shareN))
	l.keptBytes.Store(l.shareBytes)
	l.shareHeld.Store(true)
	l.meterFrom.Store(exemptNow)
}

// exemptNow is meterFrom while the ledger is exempt: no position is metered.
const exemptNow = math.MaxUint64

// exempt reports whether the ledger's claims skip the budget (see
// exemptFrom and meter).
func (l *ledger) exempt() bool { return l.meterFrom.Load() == exemptNow }

// meter ends the exemption, when the producer writes a second topic: from
// the ring's tail on, claims are charged to the budget message by message
// again. The ring is frozen meanwhile, so that a claim that read exempt
// before the store lands either below the tail (covered by the share) or
// after the thaw, where it sees meterFrom and charges itself (see
// tryClaimExempt). Of the share, the budget keeps what the exempt
// positions still live may hold, which goes back once they are all
// released: now, or by the dispatcher's release; the rest goes back at
// once, so that the other topics have the room they had before the
// exemption (a callback of the first topic may wait for room in another:
// its own position is released only after it returns). Under the
// producer's lanesMu; idempotent.
func (l *ledger) meter() {
	if !l.exempt() {
		return
	}
	t := l.ring.Freeze()
	// No claim lands while frozen: the exempt positions live from now
	// on are among those from head to t, and hold at most the bytes the
	// ring counts reserved now (its count of released bytes is read
	// first: an overestimate, never less).
	n := min(int64(t-l.ring.Head()), int64(l.shareN))
	bytes := min(max(l.ring.Bytes(), 0), l.shareBytes)
	l.keptN.Store(n)
	l.keptBytes.Store(bytes)
	l.meterFrom.Store(t) // the exemption ends with this store
	l.ring.Thaw()
	l.budget.unhold(l.shareN-int(n), l.shareBytes-bytes)
	// The dispatcher releases, then calls giveShare; this stores
	// meterFrom, then calls it: one of the two sees the other's store.
	l.giveShare()
}

// giveShare gives what the ledger keeps of its share back to the budget
// once every position below meterFrom is released. Once, from whichever
// goroutine sees it first.
func (l *ledger) giveShare() {
	if l.ring.Head() >= l.meterFrom.Load() && l.shareHeld.Swap(false) {
		l.budget.unhold(int(l.keptN.Load()), l.keptBytes.Load())
	}
}

// tryClaimExempt is tryClaim for an exempt ledger: the ring's claim alone.
// A claim made after meter ended the exemption (it read exempt just before)
// is charged to the budget as a metered claim would be, without its
// limits: it is already made, and at most one per claimer.
func (l *ledger) tryClaimExempt(sizes []int64) (uint64, int, error) {
	var pos uint64
	n := 1
	var err error
	if len(sizes) == 1 {
		pos, err = l.ring.TryClaim(sizes[0])
	} else {
		pos, n, err = l.ring.TryClaimN(sizes)
	}
	if err != nil {
		return 0, 0, err
	}
	if pos >= l.meterFrom.Load() {
		var bytes int64
		for _, s := range sizes[:n] {
			bytes += s
		}
		l.budget.force(n, bytes)
	}
	return pos, n, nil
}

// claimWait waits until at least the first of sizes fits and claims as many
// as fit, until the deadline d, ctx's end or close.
//
// It is ringbuf's Claim loop (yield, arm, try again, park) with what only
// the producer has: the memory budget shared with other topics and
// producers (its own wake-ups, and the rule that a topic whose own share
// is full waits for its own releases only), the message's deadline and
// ctx, and runs of several messages. Claim could take them only as
// callbacks and more channels on every wait; the claim itself (tryClaim,
// the ring's TryClaim and TryClaimN) is already the ring's.
func (l *ledger) claimWait(ctx context.Context, sizes []int64, d int64, now func() int64, newTimer func(time.Duration) (<-chan time.Time, func() bool)) (uint64, int, error) {
	for range 4 { // the dispatcher is often about to release: yield first
		runtime.Gosched()
		if pos, n, err := l.tryClaim(sizes); err != ringbuf.ErrFull {
			return pos, n, err
		}
	}
	t := now()
	wait := time.Duration(l.expiry(d, t) - t)
	if wait <= 0 {
		return 0, 0, ErrTimeout
	}
	expired, stop := newTimer(wait)
	defer stop()
	for {
		// Room often comes with the deadline (the sweeper frees slots
		// when their messages expire): a message past its own deadline
		// is never queued, whichever of the two wakes us first.
		if t := now(); l.expiry(d, t) <= t {
			return 0, 0, ErrTimeout
		}
		room := l.ring.ArmRoom()
		own, shared := l.budget.arm()
		pos, n, err := l.tryClaim(sizes)
		if err != ringbuf.ErrFull {
			l.ring.DisarmRoom()
			l.budget.disarm()
			return pos, n, err
		}
		if !l.ring.MayHaveRoom() && !l.ring.HasRoom(sizes[0]) {
			// The topic's own share is what is full: only its releases
			// make room, not every release of the producer's other topics.
			l.budget.disarm()
			own, shared = nil, nil
		}
		select {
		case <-room:
		case <-own:
		case <-shared:
		case <-ctx.Done():
			err = ctx.Err()
		case <-expired:
			err = ErrTimeout
		}
		l.ring.DisarmRoom()
		if own != nil {
			l.budget.disarm()
		}
		if err != ringbuf.ErrFull {
			return 0, 0, err
		}
	}
}

// publish fills the positions claimed from first on with msgs, in place,
// and makes them visible to the pump at once. They share callback cb (nil
// for a Send, whose waiter w is then given, for a run of one), context ctx
// (nil when it can never end; one that can resolves each message as
// Canceled when it does) and slot deadline d.
func (l *ledger) publish(first uint64, msgs []*Message, cb Callback, ctx context.Context, d int64, w *waiter) {
	if w != nil {
		w.pos.Store(first)
		w.ticket.Store(waiterTickets.Add(1))
		l.waitRef(first, true).Store(w)
	}
	for i, m := range msgs {
		pos := first + uint64(i)
		s := l.ring.Slot(pos)
		v := &s.Value // zeroed by the release of the position before
		v.msg, v.data, v.n, v.cb = m, unsafe.Pointer(unsafe.SliceData(m.Payload)), len(m.Payload), cb
		s.SetDeadline(d)
		if ctx != nil {
			// Registered before the publish, so it may fire first:
			// Resolve waits for the publish.
			v.hook = &ctxHook{ctx: ctx, stop: context.AfterFunc(ctx, func() { l.fail(pos, ringbuf.Canceled) })}
		}
	}
	l.ring.PublishN(first, len(msgs))
}

// lateSlack is how much earlier than a fresh message's deadline a message
// may enter the ring before the sweeper must be told: the sweeper scans the
// ring in order and stops at the first deadline in the future, which is
// right only while deadlines grow with position. Messages that waited for
// room break that; they go into the late queue instead.
const lateSlack = 5 * time.Millisecond

// enteredLate handles a message that waited for room: its deadline may be
// earlier than those of messages ahead of it.
func (l *ledger) enteredLate(pos uint64, d, now int64) {
	expired, _ := l.due(d, now)
	switch {
	case expired:
		l.fail(pos, ringbuf.Expired)
	case d < now+l.timeout-int64(lateSlack):
		l.late.push(pos, d)
		select {
		case l.sweepWake <- struct{}{}:
		default:
		}
	}
}

// close stops new claims; waiting claimers return ErrClosed.
func (l *ledger) close() { l.ring.Close() }

// ---- the pump ----

// resendFrom returns the position a new connection starts writing at: the
// oldest that may be unresolved.
func (l *ledger) resendFrom() uint64 { return max(l.ring.Acked(), l.ring.Head()) }

// handshake takes the broker's last stored seq for this topic and name
// from a TOPIC_OK. The topic's first of an incarnation (fresh: a new lane,
// or the first after a new epoch) sets seqBase so that the first position never written gets lastSeq+1
// (every position below it is released: nothing was written yet, or the
// pump waited after a fence). Later ones acknowledge what the broker stored
// while the connection was down. It returns err (ErrSequenceConflict, for a
// seq beyond anything written; ErrSequenceExhausted, for a seq at
// wire.MaxSeq) when the connection cannot go on, and lost (ErrRecordsLost)
// when the broker is below what it acknowledged: the connection goes on,
// and the user is told.
func (l *ledger) handshake(lastSeq uint64, fresh bool) (lost, err error) {
	if lastSeq >= wire.MaxSeq {
		return nil, fmt.Errorf("%w: the broker's last seq is %d, the limit", ErrSequenceExhausted, lastSeq)
	}
	if fresh {
		from := l.maxWritten.Load()
		l.seqBase.Store(lastSeq - from) // seq(from) = lastSeq+1, modulo 2^64
		// Every position below from is resolved (yield aborted what was
		// written): the cursor only skips them.
		l.ring.AckThrough(from)
		return nil, nil
	}
	base := l.seqBase.Load()
	stored := int64(lastSeq - base) // positions of ours the broker holds: a distance (see seqBase)
	if acked := l.ring.Acked(); stored < int64(acked) {
		// The broker lost records it acknowledged (a store repaired to a
		// side file, a memory store restarted, a stale replica): nothing to
		// resend, but the user must hear of it.
		return fmt.Errorf("%w: the broker's last seq is %d, but it acknowledged up to %d", ErrRecordsLost, lastSeq, base+acked), nil
	}
	if written := l.maxWritten.Load(); stored > int64(written) {
		return nil, fmt.Errorf("%w: broker's last seq %d, ours at most %d", ErrSequenceConflict, lastSeq, base+written)
	}
	l.ackThrough(lastSeq)
	return nil, nil
}

// batchLimits are a connection's limits for nextBatch.
type batchLimits struct {
	topic    uint32    // the topic's id on the connection
	messages int       // records per batch
	bytes    int       // raw bytes per batch
	frame    int       // the connection's frame limit
	end      uint64    // the first position whose sequence ID would be beyond wire.MaxSeq
	cached   int       // cachedFrameBytes, or 0: frames of mid-sized records grow to the limit too
	sum      bool      // the frame is sent as built: its CRC is taken run by run (see wire.BatchBuilder.Sum)
	splice   int       // payloads of at least this many bytes (0: none) go by reference (AddRef): see ZeroCopyMin
	pass     *passLock // held before a run with such payloads is marked written (see detachPayloads)
}

// writeRun is how many positions nextBatch takes into Writing before it
// copies them. Each state change is a locked instruction, which waits for
// every load and store before it: one per copy would expose each copy's cache
// misses (lines written by the senders and read by the broker on the other
// core) one after the other, while a run's copies overlap theirs. A run is
// held in Writing while it is copied: a few microseconds for small messages,
// at most the copy of one batch's bytes (MaxBatchBytes) for large ones.
const writeRun = 32 // at most 32: nextBatch marks a run's resent positions in a uint32

// cachedFrameBytes, minCachedRecords and maxCachedRecords make frames of
// mid-sized records small enough for the caches: a frame whose next record
// would take it past cachedFrameBytes closes there if it holds from
// minCachedRecords to maxCachedRecords (records of about 510 B to 2040 B,
// metadata included); any other grows to the byte limit (or the message
// limit). From the pump's copy to the broker's checksum, a frame of 128
// KiB stays in a core's caches where one of 1 MiB does not, and it is
// short enough for the pump to write itself (transport/tcp hands runs of
// 512 KiB or more to a writer goroutine). On the 2-vCPU host of
// docs/performance.md ("Tenth round"), one topic over tcp: 1 KiB messages
// 23-35% faster (9-19% less CPU per message), 512 B 10-20%. Not for
// larger records: 4 KiB records in frames of 64 (256 KiB, written by the
// pump) were 7-15% slower (ninth and tenth rounds). Nor for smaller ones: 100 B records in frames
// of 128 KiB cost 6-9% more CPU per message (three times the frames, and
// their receipts), 256 B 2% less CPU but 4% slower. The pump asks for it
// (batchLimits.cached) only on a transport that takes several frames at
// once (tcp, stdnet: one that takes them one by one, transport/mem, has a
// connection's window of n frames, which would hold n of 128 KiB), and not
// for a producer that compresses: its frames leave the caches anyway,
// through the compressor, and a larger one compresses better.
const (
	cachedFrameBytes = 128 << 10
	minCachedRecords = 64
	maxCachedRecords = 256
)

// nextBatch builds one BATCH frame in bb (in its own buffer) from
// consecutive positions from pos on, and returns the next position to look
// at, the number of records, and the byte bound that closed the frame, if
// one did (the next record did not fit): the limit (lim.bytes or
// lim.frame), or lim.cached for a frame of mid-sized records; 0 if none
// did (see lane.flight). It stops at the limits
// (lim.end included), at the first unpublished position, and at a gap: a
// position that is resolved (or that a receipt is taking: see
// ringbuf.Ring.AckTarget), or that it resolves itself because its deadline
// passed or its context ended (such a message is never written) or
// because it is too large for the connection (Rejected, reported in
// order). Sequence IDs in one frame are consecutive.
//
// It works in runs of up to writeRun positions: it moves each from Pending
// or Written to Writing (or to its failure), then copies the run into bb
// (and, with lim.sum, takes it into the frame's CRC: wire.BatchBuilder.Sum),
// then moves it to Written: the fresh ones with one store of the ring's
// written cursor (ringbuf.Ring.MarkWritten), the resent ones each (and it
// tells the Send of one a receipt acknowledged meanwhile: see resentBack).
func (l *ledger) nextBatch(bb *wire.BatchBuilder, pos uint64, lim batchLimits, now int64) (next uint64, n int, closedAt int) {
	limit := min(lim.bytes, lim.frame)
	bound := limit
	if lim.cached > 0 {
		bound = min(limit, lim.cached) // limit, once the frame's records prove large
	}
	maxRecord := lim.frame - wire.BatchHeaderSize - wire.RecordOverhead(lim.frame)
	bb.Reset(bb.Bytes(), lim.topic, l.seq(pos))
	size := bb.Size()       // of the frame with the run taken so far
	ackedMeanwhile := false // a resent position was acknowledged while written again (see resentBack)
	var run [writeRun]*ringbuf.Slot[entry]
	pager := l.ring.Pager()
	for more := true; more && n < lim.messages; {
		first, k := pos, 0 // the run: positions first to first+k-1, in Writing
		var resent uint32  // bit i: the run's i-th position is written again
		var refs uint32    // bit i: the run's i-th payload goes by reference
		copied := 0        // the bytes the run adds to bb's buffer
		more = false
		for k < writeRun && n+k < lim.messages && pos < lim.end {
			slot := pager.Peek(pos)
			st := l.ring.StateAt(slot, pos)
			if st == ringbuf.Unpublished {
				break
			}
			if st == ringbuf.Written && pos < l.ring.AckTarget() {
				// A receipt took it: the acked cursor is moving past it
				// (ringbuf's AckThrough), and nothing else may move it.
				st = ringbuf.Acked
			}
			if st.Final() {
				if n+k > 0 {
					break
				}
				pos++
				first = pos
				bb.Reset(bb.Bytes(), lim.topic, l.seq(pos))
				continue
			}
			// Into Writing before the slot is read: until then the sweeper
			// may resolve pos, the dispatcher release it and a sender claim
			// the slot again for a later position, writing its size.
			if !l.ring.TransitionAt(slot, pos, st, ringbuf.Writing) {
				continue // resolved meanwhile, or a receipt took it: look again
			}
			// Writing: this goroutine alone may resolve pos now.
			rec := int(slot.Size())
			after := size + wire.RecordOverhead(rec) + rec
			if n+k > 0 && after > bound && bound < limit && (n+k < minCachedRecords || n+k > maxCachedRecords) {
				bound = limit // large or small records: the frame grows to the limit
			}
			if n+k > 0 && after > bound {
				l.ring.TransitionAt(slot, pos, ringbuf.Writing, st) // for the next batch
				if st == ringbuf.Written {
					ackedMeanwhile = l.resentBack(pos) || ackedMeanwhile
				}
				closedAt = bound
				break
			}
			fail := ringbuf.Unpublished
			switch e := &slot.Value; {
			case l.expired(slot.Deadline(), now):
				fail = ringbuf.Expired
			case e.hook != nil && e.hook.ctx.Err() != nil:
				fail = ringbuf.Canceled
			case rec > maxRecord:
				fail = ringbuf.Rejected
			}
			if fail != ringbuf.Unpublished {
				l.ring.TransitionAt(slot, pos, ringbuf.Writing, fail)
				l.settle(pos, fail)
				pos++
				if n+k > 0 {
					break
				}
				first = pos
				bb.Reset(bb.Bytes(), lim.topic, l.seq(pos))
				continue
			}
			if st != ringbuf.Pending {
				resent |= 1 << k
			}
			copied += after - size
			// By reference: a payload without metadata, large enough,
			// written for the first time. A message written again (after
			// a reconnect) is copied: the old connection's late receipt
			// may resolve it while the new one still holds its frame,
			// and a success runs its callback without a Detach (see
			// Producer.detachPayloads); a first write is acknowledged
			// only by the connection that wrote it, after it did.
			if lim.splice > 0 && rec >= lim.splice && st == ringbuf.Pending && rec == slot.Value.n {
				refs |= 1 << k
				copied -= rec
			}
			size = after
			run[k] = slot
			k++
			pos++
			more = k == writeRun // a full run: there may be more
		}
		// Room for the run's bytes. A frame that fits a small buffer
		// grows no further than bigBuffer, which the pool keeps any number
		// of (see bufPool), and one that will close at cachedFrameBytes
		// no further than that.
		grow := bound // a frame of mid-sized records keeps its buffer within cachedFrameBytes
		if size <= bigBuffer {
			grow = min(bound, bigBuffer)
		}
		bb.Grow(copied, grow)
		for i, slot := range run[:k] {
			if e := &slot.Value; refs&(1<<i) != 0 {
				bb.AddRef(e.payload())
			} else if int(slot.Size()) == e.n {
				bb.Add(e.payload()) // no metadata (see config.validate): msg stays unread
			} else {
				bb.AddRecord(e.payload(), e.msg.Key, e.msg.Headers, e.msg.EventTime)
			}
		}
		if lim.sum {
			bb.Sum() // the run's bytes into the frame's CRC while they are in the caches
		}
		if testHookRunCopied != nil {
			testHookRunCopied()
		}
		if refs != 0 {
			// From Written on, its messages may resolve, and their
			// callbacks wait for the pass to end (see detachPayloads).
			lim.pass.hold()
		}
		// Written: the fresh ones with one store, the resent ones each.
		l.ring.MarkWritten(first + uint64(k))
		for i, slot := range run[:k] {
			if p := first + uint64(i); resent&(1<<i) != 0 {
				l.ring.TransitionAt(slot, p, ringbuf.Writing, ringbuf.Written)
				ackedMeanwhile = l.resentBack(p) || ackedMeanwhile
			}
		}
		n += k
	}
	if pos > l.maxWritten.Load() {
		l.maxWritten.Store(pos)
	}
	if ackedMeanwhile {
		l.wakeDispatcher()
	}
	return pos, n, closedAt
}

// testHookNotify, when set (by tests, before the ledger is used), runs in
// notify between its checks of the waiter and its taking it.
var testHookNotify func()

// testHookRunCopied, when set (by tests, before the ledger is used), runs
// in nextBatch once a run was copied, while its positions are Writing.
var testHookRunCopied func()

// resentBack is called by the pump once it moved pos, which it was writing
// again (a resend), back to Written, and reports whether pos is Acked: a
// receipt that covered it meanwhile moved the acked cursor past it while it
// was Writing, so ackThrough did not hand it to its Send nor could the
// dispatcher's walk pass it; the pump does both then (the caller wakes the
// dispatcher). The pump's move then its read of the cursor, and
// ackThrough's move of the cursor then its read of the state: one of the
// two sees the other, and notify hands the outcome over once.
func (l *ledger) resentBack(pos uint64) bool {
	if pos >= l.ring.Acked() {
		return false
	}
	l.notify(pos, ringbuf.Acked)
	return true
}

// ---- resolution ----

// ackThrough marks every written position whose sequence ID is <= seq as
// acknowledged (the broker's receipts are cumulative) and wakes the
// dispatcher. It runs on a transport goroutine and never blocks: the
// ring's AckThrough moves its acked cursor, with no store to the
// positions' slots (it waits only while a resolver is a few instructions
// into resolving one of them), and a Send waiting for one of them is
// handed its outcome here, or, for a position the pump was writing again
// meanwhile, by the pump (see resentBack). Stats count the positions as
// acknowledged when the dispatcher reaches them (see walk).
//
// Positions never handed to a connection are not acknowledged, whatever the
// broker says. Two calls may overlap (an old connection's last receipt and
// a new one's): the cursor only moves forward, and a position resolves once
// (see ringbuf.Ring.AckThrough).
func (l *ledger) ackThrough(seq uint64) {
	// Positions below d are acknowledged. A receipt at or below seqBase (a
	// late one of a connection of a former incarnation) is a distance of
	// 0 or less: nothing.
	d := int64(seq - l.seqBase.Load())
	if d <= 0 {
		return
	}
	upto := min(uint64(d), l.maxWritten.Load())
	from := l.resendFrom()
	if upto <= from {
		return
	}
	l.ring.AckThrough(upto)
	if l.waits.Load() != nil { // a Send has run: one may wait for a position here
		pg := l.ring.Pager()
		for pos := from; pos < upto; pos++ {
			if pg.State(pos) == ringbuf.Acked {
				l.notify(pos, ringbuf.Acked)
			}
		}
	}
	l.wakeDispatcher()
}

// fail resolves pos as the failure st unless it is resolved already.
func (l *ledger) fail(pos uint64, st ringbuf.State) {
	if _, ok := l.ring.Resolve(pos, st); ok {
		l.settle(pos, st)
	}
}

// settle is called once by the goroutine that resolved pos as the failure
// st. Rejected is reported in order, like a success;
// other failures are queued for the dispatcher, which reports them at once
// (the documented exception to ordering).
func (l *ledger) settle(pos uint64, st ringbuf.State) {
	l.notify(pos, st)
	if st != ringbuf.Rejected {
		l.failMu.Lock()
		l.fails = append(l.fails, pos)
		l.failMu.Unlock()
	}
	l.wakeDispatcher()
}

// failBelow fails every position still pending below tail as st (Closed,
// Aborted). It settles them as a run: each Send is notified, and the dispatcher is woken
// once, for its in-order walk, which finds every position below tail
// resolved. (Queued one by one, as fail does, 2000 failures took 2 to 16
// ms under the race detector, most of it passing failMu back and forth
// with the dispatcher.)
func (l *ledger) failBelow(tail uint64, st ringbuf.State) {
	for pos := l.ring.Head(); pos < tail; pos++ {
		if _, ok := l.ring.Resolve(pos, st); ok {
			l.notify(pos, st)
		}
	}
	l.wakeDispatcher()
}

// resolvedBelow reports whether every live position below tail is resolved.
func (l *ledger) resolvedBelow(tail uint64) bool {
	for pos := l.ring.Head(); pos < tail; pos++ {
		if !l.ring.State(pos).Final() {
			return false
		}
	}
	return true
}

// releasedBelow waits until every position below tail is released, or
// done closes (false).
func (l *ledger) releasedBelow(tail uint64, done <-chan struct{}) bool {
	return l.ring.WaitHead(tail, done) == nil
}

func (l *ledger) wakeDispatcher() { l.wake() }

// ---- deadlines (the sweeper) ----

// due reports whether the message whose slot deadline is d has expired at
// the precise time now, never early; if not, next is when to look again.
// With a coarse clock d was stamped from it, and it may have been stale;
// its Upper bounds when the message was really sent.
func (l *ledger) due(d, now int64) (expired bool, next int64) {
	if d > now {
		return false, d // the true expiry is never before d
	}
	c := l.coarse
	if c == nil {
		return true, 0
	}
	sent, ok := c.Upper(d - l.timeout)
	if !ok {
		// d was stamped from the latest value and the ticker has not run
		// since (it is starved): publish a value here, so the deadline is
		// late by this goroutine's scheduling only, not the ticker's.
		c.publish()
		sent, ok = c.Upper(d - l.timeout)
	}
	switch {
	case !ok:
		return false, now + int64(coarseTick)
	case sent+l.timeout <= now:
		return true, 0
	}
	return false, sent + l.timeout
}

func (l *ledger) expired(d, now int64) bool {
	e, _ := l.due(d, now)
	return e
}

// expiry returns the precise time by which the message with slot deadline
// d expires, counted from now when the coarse clock cannot tell yet.
func (l *ledger) expiry(d, now int64) int64 {
	c := l.coarse
	if c == nil {
		return d
	}
	if sent, ok := c.Upper(d - l.timeout); ok {
		return sent + l.timeout
	}
	c.publish() // as in due
	if sent, ok := c.Upper(d - l.timeout); ok {
		return sent + l.timeout
	}
	return now + l.timeout // the message was sent before now
}

// expireDue resolves as Expired every pending position, in order from
// from, whose deadline passed by now, and stops at the first deadline
// still ahead; then the late queue. It returns the new scan start (every
// position below is resolved) and when to look again (0: nothing pending).
func (l *ledger) expireDue(from uint64, now int64, due []lateEntry) (uint64, int64, []lateEntry) {
	from, next := l.expireInOrder(from, now)
	due, lateNext := l.late.due(now, due[:0])
	for _, e := range due {
		// Its true expiry may still be ahead (see due): then later.
		if expired, at := l.due(e.deadline, now); !expired {
			if !l.ring.State(e.pos).Final() {
				l.late.pushAt(e.pos, e.deadline, at)
				lateNext = minDeadline(lateNext, at)
			}
			continue
		}
		l.fail(e.pos, ringbuf.Expired)
	}
	if lateNext != 0 {
		next = minDeadline(next, lateNext)
	}
	return from, next, due
}

func (l *ledger) expireInOrder(from uint64, now int64) (uint64, int64) {
	from = max(from, l.ring.Head())
	tail := l.ring.Tail()
	resolvedPrefix := true
	pager := l.ring.Pager()
	for pos := from; pos < tail; pos++ {
		slot := pager.Peek(pos)
		st := l.ring.StateAt(slot, pos)
		if st.Final() {
			if resolvedPrefix {
				from = pos + 1
			}
			continue
		}
		resolvedPrefix = false
		if st == ringbuf.Unpublished {
			// Claimed, about to be published (or released and its slot
			// taken again: the next scan starts past head); look again soon.
			return from, now + int64(minSweep)
		}
		// The slot is read once, through the page looked up with its
		// state: pos may be resolved and released meanwhile, and its page
		// then taken off the ring's page table (ringbuf recycles pages),
		// so looking it up again may find none. Its deadline is read with
		// DeadlineAt, which keeps the slot from a later claim meanwhile,
		// and is pos's while pos is published and unresolved.
		d, st := l.ring.DeadlineAt(slot, pos)
		if st.Final() || st == ringbuf.Unpublished {
			continue // resolved meanwhile
		}
		if expired, at := l.due(d, now); !expired {
			return from, at
		}
		l.fail(pos, ringbuf.Expired)
	}
	return from, 0
}

func minDeadline(cur, d int64) int64 {
	if cur == 0 || d < cur {
		return d
	}
	return cur
}

// ---- Send ----

// waiter receives one Send's resolved state. It is handed over through
// ledger.waits (see notify), so it can be pooled: nobody holds it once its
// state was sent.
type waiter struct {
	ch     chan ringbuf.State // capacity 1
	pos    atomic.Uint64      // the position it waits for
	ticket atomic.Uint64      // this use's, from waiterTickets; notified once a notifier took it
	id     MessageID          // set before an Acked state is sent: seq(pos) then
}

// waiterTickets numbers the uses of waiters (they are pooled across every
// ledger, whose positions all start at 0): a notifier takes a waiter by
// moving the ticket it read to notified, which fails once the waiter
// serves another Send. notified is no ticket.
var waiterTickets atomic.Uint64

const notified = math.MaxUint64

var waiters = sync.Pool{New: func() any { return &waiter{ch: make(chan ringbuf.State, 1)} }}

// notify hands the resolved state st of pos to its Send, if pos is a Send's.
// The goroutine that resolved pos calls it (for an acknowledged one, any
// ackThrough whose receipt covers it, or the pump that wrote it again
// meanwhile: several may), and the dispatcher does not release a Send's
// position before one of them took its waiter (see waitNotified), so
// waits[pos] cannot have been reused for a later position of a Send
// meanwhile; a later SendAsync position never sets it.
//
// A notifier takes the waiter by moving the ticket it read to notified,
// after it checked that the waiter is still pos's (the reference still
// holds it, for this position): a notifier that read the reference before
// the waiter went back to the pool and to another Send, of this ledger or
// of another one, whose positions start at 0 too, then fails to take it.
func (l *ledger) notify(pos uint64, st ringbuf.State) {
	ref := l.waitRef(pos, false)
	if ref == nil {
		return
	}
	w := ref.Load()
	if w == nil {
		return
	}
	t := w.ticket.Load()
	if t == notified || w.pos.Load() != pos || ref.Load() != w {
		return
	}
	// Now, not when Send reads it: under WaitForName seqBase may move once
	// the position is released, which taking the waiter allows.
	id := MessageID(l.seq(pos))
	if testHookNotify != nil {
		testHookNotify()
	}
	if !w.ticket.CompareAndSwap(t, notified) {
		return
	}
	ref.CompareAndSwap(w, nil) // unless a later Send's waiter is there already
	if st == ringbuf.Acked {
		w.id = id
	}
	w.ch <- st
}

// waitRef returns the waiter reference of pos; nil before the ledger's
// first Send, unless create, which makes them.
func (l *ledger) waitRef(pos uint64, create bool) *atomic.Pointer[waiter] {
	ws := l.waits.Load()
	if ws == nil {
		if !create {
			return nil
		}
		n := 1 // a power of two at least the positions live at once
		for n < l.shareN {
			n <<= 1
		}
		fresh := make([]atomic.Pointer[waiter], n)
		if !l.waits.CompareAndSwap(nil, &fresh) {
			ws = l.waits.Load()
		} else {
			ws = &fresh
		}
	}
	return &(*ws)[pos&uint64(len(*ws)-1)]
}

// waitNotified waits until the Send of pos, resolved, has been notified:
// the goroutine that resolved it calls notify right after.
func (l *ledger) waitNotified(pos uint64) {
	ref := l.waitRef(pos, false)
	if ref == nil {
		return
	}
	for {
		w := ref.Load()
		if w == nil || w.pos.Load() != pos || w.ticket.Load() == notified {
			return
		}
		runtime.Gosched()
	}
}

// ---- the dispatcher ----

// takeFails swaps the queue of failed positions for spare (emptied) and
// returns it.
func (l *ledger) takeFails(spare []uint64) []uint64 {
	l.failMu.Lock()
	defer l.failMu.Unlock()
	fails := l.fails
	l.fails = spare[:0]
	return fails
}

// deliverFails delivers, out of order, the failed positions in *fails that
// the in-order walk has not passed (below next), marking each Done first.
// It shortens *fails before each call: deliver may end the goroutine.
func (l *ledger) deliverFails(fails *[]uint64, next uint64, deliver func(uint64, ringbuf.State)) {
	head := l.ring.Head()
	for len(*fails) > 0 {
		pos := (*fails)[0]
		*fails = (*fails)[1:]
		// Below next, the walk delivered it already (a position can be
		// failed, then walked, then queued).
		if st := l.ring.State(pos); pos >= head && pos >= next && st.Failed() {
			l.ring.Transition(pos, st, ringbuf.Done)
			deliver(pos, st)
		}
	}
}

// releaseEvery bounds how many positions the walk passes before it
// releases them, so blocked senders get room while a long run of callbacks
// is still going.
const releaseEvery = 1024

// walk delivers, in order from *next, every resolved position that is not
// Done, stops at the first unresolved one, and releases what it passed. It
// advances *next before each call: deliver may end the goroutine, and the
// next walk then resumes after it.
func (l *ledger) walk(next *uint64, deliver func(uint64, ringbuf.State)) {
	head := l.ring.Head()
	*next = max(*next, head)
	pager := l.ring.Pager()
	var run [countRun]ringbuf.State
	for {
		// A run of resolved positions: its acknowledged ones are counted
		// in Stats with one add, before their callbacks run, so that a
		// callback that reads Stats sees itself counted. A position stays
		// as read here until delivered (only this goroutine moves a
		// resolved one, to Done). counted remembers where counting
		// stopped: a walk resumed by a new dispatcher goroutine (see
		// Producer.call) counts no position twice.
		from, k, acked := *next, 0, uint64(0)
		for ; k < countRun; k++ {
			pos := from + uint64(k)
			st := pager.State(pos)
			if !st.Final() {
				break
			}
			run[k] = st
			if st == ringbuf.Acked && pos >= l.counted {
				acked++
			}
		}
		if k == 0 {
			break
		}
		if end := from + uint64(k); end > l.counted {
			l.counted = end
			if acked > 0 && l.ackedStat != nil {
				l.ackedStat.Add(acked)
			}
		}
		for i, st := range run[:k] {
			pos := from + uint64(i)
			*next = pos + 1
			if st != ringbuf.Done {
				deliver(pos, st)
			}
			if *next-head >= releaseEvery {
				l.release(*next)
				head = *next
			}
		}
	}
	l.release(*next)
}

// countRun is how many resolved positions the walk reads before it
// delivers them.
const countRun = 64

// release releases every position below upto and gives their budget back.
func (l *ledger) release(upto uint64) {
	if m := l.meterFrom.Load(); m > l.ring.Head() {
		// Exempt positions: the share the ledger holds covers them.
		l.ring.Release(min(upto, m))
		l.giveShare() // after the release: see meter
		if upto <= m {
			return
		}
		// Positions from m on were claimed after meter's store (they are
		// resolved, so the walk saw them): m is not the largest uint64.
	}
	if n, bytes := l.ring.Release(upto); n > 0 {
		l.budget.give(n, bytes)
	}
}

// entryAt returns the entry of a resolved, unreleased position (the
// dispatcher's, while it delivers it).
func (l *ledger) entryAt(pos uint64) *entry { return &l.ring.Slot(pos).Value }
