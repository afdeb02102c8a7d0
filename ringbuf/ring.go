package ringbuf

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

const (
	closedBit = 1 << 63
	frozenBit = 1 << 62 // see Freeze
	posMask   = 1<<(64-stateBits) - 1
	// spinTries is how many times a waiter yields before it parks. Yielding
	// is cheap when the other side is about to make progress on another core;
	// parking costs a channel and a scheduler round trip.
	spinTries = 4
)

// Ring is a bounded multi-producer pending queue. See the package doc for the
// picture. The zero value is not usable; call New. A Ring must not be copied.
//
// Concurrency: TryClaim, Claim, TryClaimN, ClaimN, Slot (for a live
// position: claimed, not released), Peek, Publish, PublishN, State,
// StateAt, Transition, TransitionAt, Resolve, DeadlineAt, AckThrough,
// Acked, AckTarget, Head, Tail, Len, Bytes, WaitHead, ArmRoom, DisarmRoom,
// CloseIfEmpty and Close are safe for concurrent use; a Pager is for one
// goroutine; Freeze and Thaw for one freezer at a time. The consumer side
// has three roles, each for one goroutine at a time:
//   - the reader of published positions: Published and
//     WaitPublishedUntil (in inflight, the pump), Drain (a plain queue's
//     single consumer);
//   - the writer, which moves positions to Writing and marks them
//     written: MarkWritten (in inflight, the pump too);
//   - the releaser: Release (in inflight, the dispatcher).
//
// The two roles may run concurrently with each other (the pump waits for a
// publish while the dispatcher releases), because the reader only waits on
// positions at or beyond head. Drain releases as it goes, so a ring
// used as a queue has one consumer that holds both roles.
type Ring[T any] struct {
	// Claimers write tail and claimed; the consumer writes head and
	// released. Each pair shares a line with nothing else, so a claimer and
	// the consumer only meet when one reads the other's counters.
	_         [128]byte
	tail      atomic.Uint64 // next position to claim; closedBit once closed
	claimed   atomic.Int64  // bytes ever reserved (minus refunds)
	headCache atomic.Uint64 // a recent head, refreshed by claimers when it looks full
	_         [104]byte
	head      atomic.Uint64 // oldest position not yet released
	released  atomic.Int64  // bytes ever released
	_         [112]byte
	// written is the writer's cursor: a position below it whose word says
	// Writing was written (see MarkWritten), and is Written to everyone.
	written atomic.Uint64
	// acked is the acknowledger's cursor: a position below it that is
	// Written (by its word or by written) is Acked to everyone (see
	// AckThrough). ackedTo is where AckThrough is taking it: resolvers
	// check it, under a pin, before they resolve a Written position.
	acked   atomic.Uint64
	ackedTo atomic.Uint64
	// pinned is pos+1 while someone moves Written pos (casWritten) or
	// DeadlineAt reads the deadline of pos (0: none; see pin): Release
	// and AckThrough wait for a pin they see below their target.
	pinned atomic.Uint64
	_      [96]byte

	limit    uint64
	maxBytes int64
	mask     uint64
	// pages hold the slots, pageLen each, allocated by the first claim
	// that lands in them, through books of bookLen pages, allocated the
	// same way: a ring that never fills costs the pages it used and a
	// pointer per bookLen*pageLen of its capacity, not its capacity (many
	// rings, one per topic, most of them small). A page stays on the table
	// while the ring is busy; a ring that holds few positions takes its
	// wholly released pages off it and hands them to later claims (see
	// recycle), so a reader that may meet a released position looks its
	// slot up with Peek (nil for a page not on the table) and checks the
	// stamp.
	pages []atomic.Pointer[book[T]]
	// flat: a ring made by NewFlat holds its slots in one block instead,
	// allocated by the first claim; block is its first slot, nil before.
	flat   bool
	block  atomic.Pointer[Slot[T]]
	spares struct {
		mu    sync.Mutex
		pages []*[pageLen]Slot[T] // pages recycle took off the table, for claims, oldest first
	}
	space    event  // head moved, bytes freed, or closed
	consumer parker // the consumer waits here for a publish
}

// pageLen is the number of slots allocated at once (a ring smaller than
// that uses the first Cap slots of its one page), bookLen the number of
// pages a book points to.
const (
	pageLen = 16
	bookLen = 64
)

// book points to bookLen pages.
type book[T any] [bookLen]atomic.Pointer[[pageLen]Slot[T]]

// New returns a ring that holds at most limit positions and maxBytes bytes
// reserved by their claims (a single claim larger than maxBytes is admitted
// when nothing else is reserved, so one large item can never deadlock, and a
// zero-byte claim is limited by count only). It has slots for the next
// power of two at or above limit, or, beyond one page of slots, above
// limit plus a page (see recycle); they are allocated by page as claims
// reach them.
func New[T any](limit int, maxBytes int64) (*Ring[T], error) {
	if limit <= 0 || maxBytes <= 0 || limit > 1<<40 {
		return nil, ErrInvalidSize
	}
	// Beyond one page, room for a page more than limit: claims, which
	// reach head+limit, then never reach the next use of the page that
	// holds head, and every wholly released page can be recycled.
	want := uint64(limit)
	if want > pageLen {
		want += pageLen
	}
	capacity := uint64(1)
	for capacity < want {
		capacity <<= 1
	}
	r := &Ring[T]{
		limit:    uint64(limit),
		maxBytes: maxBytes,
		mask:     capacity - 1,
		pages:    make([]atomic.Pointer[book[T]], (capacity+bookLen*pageLen-1)/(bookLen*pageLen)),
		consumer: newParker(),
	}
	return r, nil
}

// NewFlat is New for a ring whose slots are one block of Cap slots,
// allocated by the first claim and kept while the ring lives, rather than
// pages of 16 allocated as claims reach them and recycled: for a ring that
// is busy (in inflight, a producer's first topics). Claimers, the pump and
// the releaser then walk one block in the order of positions, with no page
// table to read (inflight's SendAsync/mem in interleaved rounds: 60-69 ns
// per message against 67-95 paged); a paged ring costs what it holds,
// which many small rings need.
// It has slots for the next power of two at or above limit, which must be
// at most MaxFlat (the block is allocated at once).
func NewFlat[T any](limit int, maxBytes int64) (*Ring[T], error) {
	if limit <= 0 || maxBytes <= 0 || limit > MaxFlat {
		return nil, ErrInvalidSize
	}
	capacity := uint64(1)
	for capacity < uint64(limit) {
		capacity <<= 1
	}
	return &Ring[T]{limit: uint64(limit), maxBytes: maxBytes, mask: capacity - 1, flat: true, consumer: newParker()}, nil
}

// MaxFlat is the largest limit NewFlat takes.
const MaxFlat = 1 << 24

// Flat reports whether r was made by NewFlat.
func (r *Ring[T]) Flat() bool { return r.flat }

// at returns the slot of pos in the block that starts at first.
func (r *Ring[T]) at(first *Slot[T], pos uint64) *Slot[T] {
	return (*Slot[T])(unsafe.Add(unsafe.Pointer(first), uintptr(pos&r.mask)*unsafe.Sizeof(*first)))
}

// Cap returns the number of slots: a power of two at least New's limit.
func (r *Ring[T]) Cap() int { return int(r.mask + 1) }

// slot returns the slot of a position that was claimed: its page exists.
func (r *Ring[T]) slot(pos uint64) *Slot[T] {
	if r.flat {
		return r.at(r.block.Load(), pos)
	}
	return &r.page(pos)[pos&r.mask%pageLen]
}

// page returns the page of a position that was claimed: it exists.
func (r *Ring[T]) page(pos uint64) *[pageLen]Slot[T] {
	i := pos & r.mask
	return r.pages[i/(bookLen*pageLen)].Load()[i/pageLen%bookLen].Load()
}

// pageRef returns the page table's entry for the page of pos, or nil while
// no claim has reached its book.
func (r *Ring[T]) pageRef(pos uint64) *atomic.Pointer[[pageLen]Slot[T]] {
	i := pos & r.mask
	bk := r.pages[i/(bookLen*pageLen)].Load()
	if bk == nil {
		return nil
	}
	return &bk[i/pageLen%bookLen]
}

// pageOf returns the page of pos, or nil while no claim has reached it (or
// after recycle took it off the table).
func (r *Ring[T]) pageOf(pos uint64) *[pageLen]Slot[T] {
	if pp := r.pageRef(pos); pp != nil {
		return pp.Load()
	}
	return nil
}

// peek returns the slot of pos, or nil while no claim has reached its page.
func (r *Ring[T]) peek(pos uint64) *Slot[T] {
	if r.flat {
		if first := r.block.Load(); first != nil {
			return r.at(first, pos)
		}
		return nil
	}
	pg := r.pageOf(pos)
	if pg == nil {
		return nil
	}
	return &pg[pos&r.mask%pageLen]
}

// alloc returns the slot of pos, which the caller just claimed, allocating
// its book and page if no claim did before. Claimers racing for one agree
// on the first one stored.
func (r *Ring[T]) alloc(pos uint64) *Slot[T] {
	if r.flat {
		first := r.block.Load()
		if first == nil {
			block := make([]Slot[T], r.mask+1)
			if first = &block[0]; !r.block.CompareAndSwap(nil, first) {
				first = r.block.Load()
			}
		}
		return r.at(first, pos)
	}
	i := pos & r.mask
	bp := &r.pages[i/(bookLen*pageLen)]
	bk := bp.Load()
	if bk == nil {
		bk = new(book[T])
		if !bp.CompareAndSwap(nil, bk) {
			bk = bp.Load()
		}
	}
	pp := &bk[i/pageLen%bookLen]
	pg := pp.Load()
	if pg == nil {
		pg = r.spare()
		if !pp.CompareAndSwap(nil, pg) {
			r.keep(pg)
			pg = pp.Load()
		}
	}
	return &pg[i%pageLen]
}

// spare returns a page released by recycle, or a new one: the page kept
// spareDepth pages before the last, or the oldest of fewer. Not the last:
// the consumer has just zeroed it (Release), so its lines sit modified in
// the consumer's core, and a claimer on another core writing them first
// pays a transfer from that core for each; a page kept a few releases
// earlier has left it. A producer writing many topics in turn meets this
// at every page it starts (each of its rings keeps a few pages); a ring
// that keeps many (one topic, busy) takes a page of its last release or
// so, still near in cache, not its oldest.
func (r *Ring[T]) spare() *[pageLen]Slot[T] {
	sp := &r.spares
	sp.mu.Lock()
	defer sp.mu.Unlock()
	n := len(sp.pages)
	if n == 0 {
		return new([pageLen]Slot[T])
	}
	i := max(n-1-spareDepth, 0)
	pg := sp.pages[i]
	copy(sp.pages[i:], sp.pages[i+1:])
	sp.pages[n-1] = nil
	sp.pages = sp.pages[:n-1]
	return pg
}

// spareDepth is how many pages kept after it the page spare takes has.
const spareDepth = 15

// keep keeps pg for reuse. Every page stays the ring's, on the table or
// here: a page is allocated only when none is spare, so the ring holds as
// many pages as it ever had in use at once (at most its capacity's), and a
// ring that fills and drains again and again allocates nothing after its
// first fill (letting pages go beyond a bound made the garbage collector a
// third of such a producer's work).
func (r *Ring[T]) keep(pg *[pageLen]Slot[T]) {
	r.spares.mu.Lock()
	r.spares.pages = append(r.spares.pages, pg)
	r.spares.mu.Unlock()
}

// recycle takes off the page table the pages that Release, moving head
// from h to upto, leaves wholly released, and keeps them for the claims
// that need a page (see spare): a ring that holds few positions at a time
// then holds about as many pages, whatever positions it cycles through. A
// page whose slots a claim may take again before head moves (the ring
// allows positions up to head+limit, which, with limit near the
// capacity, reach back into the page that holds head) stays. A reader that
// looked a page up before it moved finds stamps of other positions in it,
// as after any reuse of a slot. Consumer only, before head moves.
func (r *Ring[T]) recycle(h, upto uint64) {
	// The next claims of the page starting at b take positions from
	// b+capacity on; claims may reach h+limit before head moves.
	reach := h + r.limit
	for b := h - h%pageLen; b+pageLen <= upto; b += pageLen {
		if b+r.mask+1 < reach {
			continue
		}
		pp := r.pageRef(b)
		if pp == nil {
			continue
		}
		if pg := pp.Load(); pg != nil {
			pp.Store(nil)
			r.keep(pg)
		}
	}
}

// Head returns the oldest position not yet released.
func (r *Ring[T]) Head() uint64 { return r.head.Load() }

// Tail returns the next position to be claimed.
func (r *Ring[T]) Tail() uint64 { return r.tail.Load() &^ (closedBit | frozenBit) }

// Freeze holds every claim back until Thaw and returns the tail: claims
// made before it took positions below it, claims made after Thaw take
// positions at or above it, and no claim lands in between. It is for a
// caller that changes, under its own lock, how claims from a position on
// are accounted; claimers yield while the ring is frozen, so Thaw must
// follow at once. One freezer at a time.
func (r *Ring[T]) Freeze() uint64 {
	for {
		t := r.tail.Load()
		if r.tail.CompareAndSwap(t, t|frozenBit) {
			return t &^ (closedBit | frozenBit)
		}
	}
}

// Thaw lets claims go on after Freeze.
func (r *Ring[T]) Thaw() { r.tail.And(^uint64(frozenBit)) }

// Len returns the number of live (claimed and not released) positions.
func (r *Ring[T]) Len() int {
	h := r.head.Load()
	return int(r.Tail() - h)
}

// Bytes returns the bytes reserved by live positions.
func (r *Ring[T]) Bytes() int64 {
	rel := r.released.Load()
	return r.claimed.Load() - rel
}

// TryClaim reserves the next position and size bytes without waiting. It
// returns ErrFull when either limit is reached and ErrClosed after Close. The
// caller owns the slot's Value until it calls Publish, and must publish every
// position it claims.
func (r *Ring[T]) TryClaim(size int64) (uint64, error) {
	if size < 0 {
		return 0, ErrInvalidSize
	}
	reserved := false
	for {
		t := r.tail.Load()
		if t&closedBit != 0 {
			if reserved {
				r.unreserve(size)
			}
			return 0, ErrClosed
		}
		if t&frozenBit != 0 {
			runtime.Gosched() // see Freeze: a few stores away from Thaw
			continue
		}
		if t-r.headCache.Load() >= r.limit {
			// Reading head costs a cache miss after every release, so
			// claimers read a cached copy and refresh it only here.
			h := r.head.Load()
			if t-h >= r.limit {
				if reserved {
					r.unreserve(size)
				}
				return 0, ErrFull
			}
			r.headCache.Store(h)
		}
		// Bytes are reserved only once a slot is known to be free: a
		// reservation that has to be given back wakes every waiter, and a
		// claimer that did so on every try would wake itself in a loop.
		if !reserved {
			if !r.reserve(size) {
				return 0, ErrFull
			}
			reserved = true
		}
		if r.tail.CompareAndSwap(t, t+1) {
			r.alloc(t).size = size
			return t, nil
		}
	}
}

// Claim is TryClaim that waits for room: it yields a few times, then parks
// until the consumer releases positions. It returns ErrCanceled when done is
// closed first (a nil done waits forever) and ErrClosed when the ring closes.
func (r *Ring[T]) Claim(size int64, done <-chan struct{}) (uint64, error) {
	for i := 0; ; i++ {
		pos, err := r.TryClaim(size)
		if err != ErrFull {
			return pos, err
		}
		if i < spinTries {
			runtime.Gosched()
			continue
		}
		ch := r.space.arm()
		if pos, err = r.TryClaim(size); err != ErrFull {
			r.space.disarm()
			return pos, err
		}
		select {
		case <-ch:
			r.space.disarm()
		case <-done:
			r.space.disarm()
			return 0, ErrCanceled
		}
	}
}

// reserve takes size bytes against the byte limit. In use is claimed minus
// released; released is read before claimed so that the result can only
// overestimate what is in use (released only grows), never admit too much.
func (r *Ring[T]) reserve(size int64) bool {
	if size == 0 {
		return true
	}
	for {
		rel := r.released.Load()
		cur := r.claimed.Load()
		if inUse := cur - rel; inUse > 0 && inUse+size > r.maxBytes {
			return false
		}
		if r.claimed.CompareAndSwap(cur, cur+size) {
			return true
		}
	}
}

// unreserve returns bytes a failed claim held. Another claimer may have been
// refused because of them, so it is woken.
func (r *Ring[T]) unreserve(size int64) {
	if size == 0 {
		return
	}
	r.claimed.Add(-size)
	r.space.broadcast()
}

// Slot returns the slot of position pos, which must be live: claimed and
// not yet released (its page exists). Whoever holds pos in a given state
// decides what may be read or written; see Slot. A released position's
// page may have left the ring (see recycle): a caller that may meet one,
// such as a reader racing with Release, uses Peek, which returns nil for
// it, and checks the state (StateAt) after reading the slot.
func (r *Ring[T]) Slot(pos uint64) *Slot[T] { return r.slot(pos) }

// Publish makes a claimed position visible to the consumer in state Pending.
// The slot's Value and deadline must be set before.
func (r *Ring[T]) Publish(pos uint64) {
	r.slot(pos).state.Store(word(pos, Pending))
	r.consumer.wake()
}

// State returns the state of position pos, or Unpublished if its slot does
// not hold pos (not yet published, or already recycled).
func (r *Ring[T]) State(pos uint64) State { return r.StateAt(r.peek(pos), pos) }

// Peek returns the slot of position pos, or nil while no claim has reached
// its slot's page. A caller that reads and moves the state of one position
// several times looks its slot up once with Peek, then uses StateAt and
// TransitionAt, which take a nil slot.
func (r *Ring[T]) Peek(pos uint64) *Slot[T] { return r.peek(pos) }

// StateAt is State for the slot s of pos (from Peek; nil: Unpublished).
//
// A word the cursors read (Writing, Written) is read again after them, and
// the cursors with it if it changed: the state is then the word's as the
// cursors found it. (Read once, a word from before a resolver's CAS with
// an acked cursor from after it would report Acked a position the
// resolver failed; see AckThrough.)
func (r *Ring[T]) StateAt(s *Slot[T], pos uint64) State {
	if s == nil {
		return Unpublished
	}
	return r.stateFrom(s, pos, s.state.Load())
}

// stateFrom is StateAt from the word w, read from s before.
func (r *Ring[T]) stateFrom(s *Slot[T], pos, w uint64) State {
	for {
		if w>>stateBits != stamp(pos) {
			return Unpublished
		}
		raw := State(w & stateMask)
		st := r.view(pos, raw)
		if raw != Writing && raw != Written {
			return st
		}
		again := s.state.Load()
		if again == w {
			return st
		}
		w = again
	}
}

// view is the state of pos whose word says raw: a fresh write's Writing
// below the written cursor is Written, and Written below the acked cursor
// is Acked; a resend's rewriting is Writing.
func (r *Ring[T]) view(pos uint64, raw State) State {
	switch raw {
	case Writing:
		if pos >= r.written.Load() {
			return Writing
		}
		fallthrough
	case Written:
		if pos < r.acked.Load() {
			return Acked
		}
		return Written
	case rewriting:
		return Writing
	}
	return raw
}

// MarkWritten tells that the writer finished writing every position below
// upto that it moved from Pending to Writing: they are Written from now on,
// with one store for all of them rather than a transition each. Positions
// it moved from Written to Writing (a resend) it moves to Written itself,
// with Transition. Writer only; upto never goes back.
func (r *Ring[T]) MarkWritten(upto uint64) {
	if upto > r.written.Load() {
		r.written.Store(upto)
	}
}

// AckThrough tells that every Written position below upto is Acked, with
// two stores of the acked cursor for all of them rather than a transition
// each (a receipt covers a batch). Every position below upto must have
// been written or resolved otherwise. A position already resolved keeps
// its outcome; a resend's position being written again (Writing) becomes
// Acked once its writer marks it Written, and then the writer, not
// AckThrough's caller, tells whoever waits for it (inflight's pump does).
// Calls may overlap (two connections' receipts); the cursor never goes
// back.
//
// Why no Written position resolves twice: whoever moves a Written
// position (Resolve, or the writer taking it back for a resend) pins it,
// then reads ackedTo, and leaves it if AckThrough took it (AckTarget);
// AckThrough stores ackedTo, then reads the pin and waits until a pin it
// saw on a position below upto is gone, and only then moves acked, which
// readers of the state see. A pin AckThrough did not see was placed after
// that read, so its owner read ackedTo after the store; one it saw was
// resolved (or left) before acked moved: a reader never sees a position
// Acked that someone then moves. Pins placed later do not hold AckThrough
// up, so a stream of resolutions cannot starve it.
func (r *Ring[T]) AckThrough(upto uint64) {
	raise(&r.ackedTo, upto)
	r.waitUnpinned(0, upto)
	raise(&r.acked, upto)
}

// raise moves c up to to, unless it is there or beyond already; c never
// goes back, whoever else raises it meanwhile.
func raise(c *atomic.Uint64, to uint64) {
	for cur := c.Load(); cur < to && !c.CompareAndSwap(cur, to); cur = c.Load() {
	}
}

// Acked returns the acked cursor (see AckThrough).
func (r *Ring[T]) Acked() uint64 { return r.acked.Load() }

// AckTarget returns where AckThrough is taking the acked cursor: a Written
// position below it is Acked, or will be once AckThrough has waited out a
// pin, and nobody may move it meanwhile.
func (r *Ring[T]) AckTarget() uint64 { return r.ackedTo.Load() }

// pin holds pos for a resolver of a Written position or for DeadlineAt:
// one pin at a time in the ring (a second pinner waits), each held for a
// few instructions, with nothing waited for meanwhile.
func (r *Ring[T]) pin(pos uint64) {
	for !r.pinned.CompareAndSwap(0, pos+1) {
		runtime.Gosched()
	}
}

func (r *Ring[T]) unpin() { r.pinned.Store(0) }

// waitUnpinned waits until a pin it reads on a position in [lo, hi) is
// gone (the pin word changes): the caller stored what a pinner checks
// after its pin (AckThrough's ackedTo; for Release, the positions'
// resolved states) before it calls, so later pins see it.
func (r *Ring[T]) waitUnpinned(lo, hi uint64) {
	p := r.pinned.Load()
	if p == 0 || p-1 < lo || p-1 >= hi {
		return
	}
	for r.pinned.Load() == p {
		runtime.Gosched() // the pinner is a few instructions from unpin
	}
}

// testHookPinned, when set (by tests, before any ring is used), runs in
// casWritten between its check of ackedTo and its CAS, under the pin: a
// test widens the window AckThrough's wait closes.
var testHookPinned func()

// DeadlineAt returns the deadline of pos, published and not resolved, with
// the state it read (the deadline only means something when that state is
// published and not final), for a goroutine that does not hold pos, which
// may be resolved and released meanwhile (in inflight, the sweeper). s is
// pos's slot from Peek (nil: Unpublished). It pins pos (see pin), so that
// Release waits rather than free the slot for a later claim while the
// deadline is read. It needs a consumer that releases resolved
// positions only, as Release asks (Drain releases published ones: not
// with DeadlineAt).
//
// Why the pin is enough: the pin is stored before the state is read, and
// Release reads the pin after the states of what it releases were read
// final. If Release missed the pin, pos was resolved before the state read
// here, which then sees it resolved (or its slot reused) and reads no
// deadline; otherwise Release waits until the pin is gone.
func (r *Ring[T]) DeadlineAt(s *Slot[T], pos uint64) (int64, State) {
	if s == nil {
		return 0, Unpublished
	}
	r.pin(pos)
	st := r.StateAt(s, pos)
	var d int64
	if st != Unpublished && !st.Final() {
		d = s.deadline
	}
	r.unpin()
	return d, st
}

// Published reports whether position pos is published and not recycled.
func (r *Ring[T]) Published(pos uint64) bool {
	s := r.peek(pos)
	return s != nil && s.state.Load()>>stateBits == stamp(pos)
}

// Transition moves position pos from state from to state to and reports
// whether it did. It fails if pos is in another state or its slot was
// recycled.
func (r *Ring[T]) Transition(pos uint64, from, to State) bool {
	return r.TransitionAt(r.peek(pos), pos, from, to)
}

// TransitionAt is Transition for the slot s of pos (from Peek; nil:
// false). Written is a word of its own after a resend, or Writing below
// the written cursor (see MarkWritten); a resend's Writing is a word of
// its own too (rewriting), so that the cursor does not make it Written.
func (r *Ring[T]) TransitionAt(s *Slot[T], pos uint64, from, to State) bool {
	if s == nil {
		return false
	}
	if from == Written && to == Writing {
		to = rewriting
	}
	switch from {
	case Written, Writing:
		// Read the word first: the CAS is made from the word that holds
		// the state asked for, and a failed CAS costs as much as one that
		// succeeds.
		w := s.state.Load()
		if w>>stateBits != stamp(pos) || r.view(pos, State(w&stateMask)) != from {
			return false
		}
		if from == Written {
			ok, _ := r.casWritten(s, pos, w, to)
			return ok
		}
		return s.state.CompareAndSwap(w, word(pos, to))
	}
	return s.state.CompareAndSwap(word(pos, from), word(pos, to))
}

// casWritten moves pos, read Written in word w, to to, unless AckThrough
// is taking it (taken): under a pin, as AckThrough asks of everyone who
// moves a Written position (a resolver, or the writer taking it back for
// a resend).
func (r *Ring[T]) casWritten(s *Slot[T], pos, w uint64, to State) (ok, taken bool) {
	r.pin(pos)
	taken = pos < r.ackedTo.Load()
	if testHookPinned != nil {
		testHookPinned()
	}
	ok = !taken && s.state.CompareAndSwap(w, word(pos, to))
	r.unpin()
	return ok, taken
}

// Resolve moves position pos from Pending or Written to the resolved state
// to, and returns the state it left. It returns false if pos was already
// resolved or released. If pos is Writing or claimed but not yet published,
// Resolve yields until that ends (both are short and owned by running
// goroutines). to must be a resolved state.
func (r *Ring[T]) Resolve(pos uint64, to State) (State, bool) {
	for {
		s := r.peek(pos)
		var w uint64
		if s != nil {
			w = s.state.Load()
		}
		if w>>stateBits != stamp(pos) {
			if pos < r.head.Load() || pos >= r.Tail() {
				return Unpublished, false
			}
			runtime.Gosched() // claimed, about to be published
			continue
		}
		switch st := r.view(pos, State(w&stateMask)); st {
		case Pending:
			if s.state.CompareAndSwap(w, word(pos, to)) {
				return st, true
			}
		case Written:
			// AckThrough may be taking pos: see there.
			ok, taken := r.casWritten(s, pos, w, to)
			if ok {
				return st, true
			}
			if taken {
				return Acked, false
			}
		case Writing:
			runtime.Gosched()
		default:
			return st, false
		}
	}
}

// ArmRoom returns a channel that is closed the next time room may have been
// made (a release, a refunded claim, or Close). It lets a caller wait for
// room together with its own conditions (a context, a timer): arm, retry
// TryClaim, then select on the channel; call DisarmRoom once after every
// ArmRoom, whatever happened.
func (r *Ring[T]) ArmRoom() <-chan struct{} { return r.space.arm() }

// DisarmRoom ends a wait begun with ArmRoom.
func (r *Ring[T]) DisarmRoom() { r.space.disarm() }

// WaitPublishedUntil waits until position pos is published. It returns
// ErrCanceled if done is closed first, ErrClosed if the ring is closed and
// pos was never claimed, and ErrTimeout when timeout delivers (a nil timeout
// never does). Consumer only.
func (r *Ring[T]) WaitPublishedUntil(pos uint64, done <-chan struct{}, timeout <-chan time.Time) error {
	for i := 0; ; i++ {
		if r.Published(pos) {
			return nil
		}
		if i < spinTries {
			runtime.Gosched()
			continue
		}
		r.consumer.parked.Store(true)
		if r.Published(pos) {
			r.consumer.parked.Store(false)
			return nil
		}
		if t := r.tail.Load(); t&closedBit != 0 && pos >= t&^(closedBit|frozenBit) {
			r.consumer.parked.Store(false)
			return ErrClosed
		}
		select {
		case <-r.consumer.ch:
		case <-done:
			r.consumer.parked.Store(false)
			return ErrCanceled
		case <-timeout:
			r.consumer.parked.Store(false)
			return ErrTimeout
		}
	}
}

// Release frees every position below upto: their values are zeroed (so the
// ring keeps no references), their bytes are returned, and claimers waiting
// for room are woken. The consumer must have finished with them. When few
// positions stay live, the pages it leaves wholly released go off the page
// table, for later claims (see recycle): Slot must not be asked for a
// released position. While DeadlineAt reads a position below upto, it waits
// for that read to end (a few loads). It returns how many positions and
// bytes it freed. Consumer only, after it read every position below upto
// resolved.
func (r *Ring[T]) Release(upto uint64) (int, int64) {
	h := r.head.Load()
	if upto <= h {
		return 0, 0
	}
	// Not past a position whose deadline DeadlineAt is reading: a claim
	// of its slot would write the field under the reader. The reader holds
	// it for a few loads, with nothing to wait for; the consumer read the
	// positions resolved before this load, so a pin placed after it is on
	// a resolved position, whose deadline DeadlineAt does not read.
	r.waitUnpinned(h, upto)
	var freed int64
	var zero T
	pg := r.Pager()
	for p := h; p < upto; p++ {
		s := pg.Peek(p)
		freed += s.size
		s.Value = zero
	}
	if freed != 0 {
		r.released.Add(freed)
	}
	if !r.flat && r.mask+1 > pageLen && r.Tail()-upto < r.limit/2 {
		// Few positions live: their pages are enough (a ring full of
		// positions keeps its pages, which claims need again at once).
		r.recycle(h, upto)
	}
	r.head.Store(upto)
	r.space.broadcast()
	return int(upto - h), freed
}

// WaitHead waits until every position below target is released. It returns
// ErrCanceled if done is closed first.
func (r *Ring[T]) WaitHead(target uint64, done <-chan struct{}) error {
	for {
		if r.head.Load() >= target {
			return nil
		}
		ch := r.space.arm()
		if r.head.Load() >= target {
			r.space.disarm()
			return nil
		}
		select {
		case <-ch:
			r.space.disarm()
		case <-done:
			r.space.disarm()
			return ErrCanceled
		}
	}
}

// Close stops new claims: TryClaim and Claim return ErrClosed, and every
// waiting claimer and the consumer are woken. Positions already claimed stay
// live until released. Close is idempotent.
func (r *Ring[T]) Close() {
	r.tail.Or(closedBit)
	r.space.waiters.Add(1) // force the broadcast even if no waiter is counted yet
	r.space.broadcast()
	r.space.waiters.Add(-1)
	r.consumer.parked.Store(false)
	r.consumer.kick()
}

// CloseIfEmpty is Close for a ring that holds no live position: it closes
// the ring and reports true only if every claimed position was released
// (head equals tail) at the instant it closed, so no claim can have
// succeeded in between. It reports false, and changes nothing, otherwise or
// if the ring is closed already.
func (r *Ring[T]) CloseIfEmpty() bool {
	t := r.tail.Load()
	if t&closedBit != 0 || r.head.Load() != t || !r.tail.CompareAndSwap(t, t|closedBit) {
		return false
	}
	r.Close()
	return true
}

// Closed reports whether Close (or CloseIfEmpty) closed the ring.
func (r *Ring[T]) Closed() bool { return r.tail.Load()&closedBit != 0 }

// MayHaveRoom is HasRoom's quick half, for a claimer's fast path: false
// means a position is surely not free by the claimers' own cached view of
// head (which lags, so it may say false while there is room), true that
// one may be. It reads no line the consumer writes.
func (r *Ring[T]) MayHaveRoom() bool { return r.Tail()-r.headCache.Load() < r.limit }

// HasRoom reports whether a claim of size bytes would find room now: a
// free position and the bytes (with the rule of New for a claim larger
// than the limit). It is a snapshot, for a caller that must decide what to
// wait for; TryClaim decides.
func (r *Ring[T]) HasRoom(size int64) bool {
	if r.Tail()-r.head.Load() >= r.limit {
		return false
	}
	inUse := r.claimed.Load() - r.released.Load()
	return size == 0 || inUse <= 0 || inUse+size <= r.maxBytes
}

// Pager looks slots up for positions read in order, one page lookup per
// pageLen positions rather than one per position (slots are paged: see
// Ring.pages; a flat ring's, see NewFlat, it finds in the block). The
// zero Pager is not usable: take one from Ring.Pager. A Pager is for one
// goroutine; it only reads the ring's page table.
type Pager[T any] struct {
	r     *Ring[T]
	first *Slot[T]          // a flat ring's block, once seen
	page  *[pageLen]Slot[T] // the page of base, or nil
	base  uint64            // the first position of page
}

// Pager returns a Pager of r.
func (r *Ring[T]) Pager() Pager[T] { return Pager[T]{r: r} }

// Peek is Ring.Peek.
func (p *Pager[T]) Peek(pos uint64) *Slot[T] {
	if p.first != nil {
		return p.r.at(p.first, pos)
	}
	if d := pos - p.base; d < pageLen && p.page != nil { // below base, d wraps
		return &p.page[d]
	}
	return p.turn(pos)
}

// turn is Peek for a position off the current page.
func (p *Pager[T]) turn(pos uint64) *Slot[T] {
	if p.r.flat {
		// The block is there from the first claim on, and stays.
		if p.first = p.r.block.Load(); p.first == nil {
			return nil
		}
		return p.r.at(p.first, pos)
	}
	pg := p.r.pageOf(pos)
	if pg == nil {
		return nil
	}
	if p.r.mask+1 < pageLen {
		return &pg[pos&p.r.mask] // a ring smaller than a page: positions wrap within it
	}
	p.page, p.base = pg, pos-pos%pageLen
	return &pg[pos-p.base]
}

// State is Ring.State.
func (p *Pager[T]) State(pos uint64) State { return p.r.StateAt(p.Peek(pos), pos) }
