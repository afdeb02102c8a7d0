package core

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/inflightmq/inflight/ringbuf"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/wire"
)

// runPump is the connection supervisor and the writer: dial, handshake,
// write batches until the connection dies, back off (see backoff), again,
// until Close.
func (p *Producer) runPump() {
	// Buffers for frames, reused (see bufPool): large ones up to twice the
	// bytes of the full frames a topic's window holds (n places of
	// fullFramesBytes, or 2n frames of a larger limit).
	bufs := newBufPool(2*connWindow(p.cfg.framesInFlight, true),
		2*p.cfg.framesInFlight*max(fullFramesBytes, 2*min(p.cfg.maxBatchBytes, p.cfg.maxFrameSize)))
	wait := newBackoff(p.cfg.backoffMin, p.cfg.backoffMax)
	refusals := 0 // final refusals since the last handshake that succeeded
	connected := false
	for !p.stopping() {
		s, kind, err := p.connect()
		if err != nil {
			if p.stopping() {
				return
			}
			p.event(Event{Kind: kind, Err: err})
			p.report(err)
			p.lastFail.Store(newConnFailure(err))
			var refusal *brokerError
			if errors.As(err, &refusal) && refusal.final() {
				refusals++
				if n := p.cfg.maxRefusals; n > 0 && refusals >= n {
					p.abort(refusal)
				}
			}
			if !p.afterFailure(err) || !p.sleep(wait.failed()) {
				return
			}
			continue
		}
		refusals = 0
		up := p.preciseNow()
		if connected {
			p.stats.reconnects.Add(1)
		}
		p.event(Event{Kind: EventConnected, Epoch: s.epoch, Reconnect: connected})
		connected = true
		var hb sync.WaitGroup
		hb.Go(s.heartbeat)
		p.writeLoop(s, bufs)
		s.fail(ErrClosed) // stops the heartbeat if the pump stopped first
		hb.Wait()
		s.conn.Close()
		p.setSession(nil)
		cause := s.reason()
		if p.stopping() {
			cause = ErrClosed
		}
		p.event(Event{Kind: EventDisconnected, Err: cause})
		if cause != ErrClosed {
			lost := wrap(errConnLost, cause)
			p.report(lost)
			p.lastFail.Store(newConnFailure(lost))
			if !p.afterFailure(cause) {
				return
			}
		}
		if d := wait.ended(time.Duration(p.preciseNow() - up)); d > 0 && !p.sleep(d) {
			return
		}
	}
}

// bufPool is the pump's buffers for frames. A buffer comes back (on back,
// its Owner) when the transport has written its frame, or, for a
// transport that hands frames to the broker as they are, when the broker
// is done with it: for a stalled topic's frame maybe never, for a dead
// connection's maybe late. The windows, not the pool, bound what is in
// flight: get makes a buffer when none is back, and the pool keeps what
// comes back up to a bound (two per frame a connection may have in
// flight), dropping the rest, and of buffers over bigBuffer only as many
// as take twice the bytes of the full frames a topic's window holds (16
// MiB at the defaults: 16 frames of 1 MiB, or 128 of 128 KiB, whose
// buffers nextBatch keeps within 128 KiB): many topics' frames are small,
// and a burst of large ones leaves no more than a few large buffers
// behind.
//
// get takes the buffer that came back last. Every buffer grows to the
// size of the frames it carried (up to twice that: nextBatch doubles a
// buffer too small, within bigBuffer for a frame that fits it), and a
// busy topic's frames go round the few its window needs, which stay in
// the caches; taken in the order they came back, every buffer the pool
// holds would go round (16 frames of 4096 records on mem are 8 MB: each
// had left the caches by its turn, and the pump's copies of records into
// them took three times as long).
type bufPool struct {
	back   chan *transport.Buffer
	stack  []*transport.Buffer // came back, the last on top; at most cap(back)
	big    int                 // the bytes of the stack's buffers over bigBuffer
	maxBig int                 // the most big may be
}

// bigBuffer is the size beyond which the pool keeps buffers only up to
// its byte bound.
const bigBuffer = 64 << 10

func newBufPool(keep, maxBig int) *bufPool {
	return &bufPool{back: make(chan *transport.Buffer, keep), maxBig: maxBig}
}

// get returns a buffer whose Owner is the pool. The pump's.
func (bp *bufPool) get() *transport.Buffer {
	for more := true; more && len(bp.stack) < cap(bp.back); {
		select {
		case b := <-bp.back:
			bp.put(b)
		default:
			more = false
		}
	}
	if n := len(bp.stack); n > 0 {
		b := bp.stack[n-1]
		bp.stack[n-1] = nil
		bp.stack = bp.stack[:n-1]
		if c := cap(b.Bytes); c > bigBuffer {
			bp.big -= c
		}
		return b
	}
	return &transport.Buffer{Owner: bp.back}
}

// put keeps b on the stack if the bounds allow, or drops it: a buffer that
// came back (see get), or one get returned and the pump did not use. The
// pump's.
func (bp *bufPool) put(b *transport.Buffer) {
	if len(bp.stack) >= cap(bp.back) {
		return
	}
	if c := cap(b.Bytes); c > bigBuffer {
		if bp.big+c > bp.maxBig {
			return
		}
		bp.big += c
	}
	bp.stack = append(bp.stack, b)
}

func (p *Producer) stopping() bool {
	select {
	case <-p.stop:
		return true
	default:
		return false
	}
}

// sleep waits d on the producer's clock; false if the producer is stopping.
func (p *Producer) sleep(d time.Duration) bool {
	t := p.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-p.stop:
		return false
	}
}

// connect dials and completes the handshake. On success the session is
// ready: receipts resolve, and writing starts at the oldest unresolved
// position. On failure kind says which step failed.
func (p *Producer) connect() (*session, EventKind, error) {
	s := newSession(p)
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.dialTimeout)
	go func() { // Close must not wait for a slow dial; ends with ctx
		select {
		case <-p.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	conn, err := p.dialer.Dial(ctx, s)
	cancel()
	if err != nil {
		return nil, EventDialFailed, wrap(errDial, err)
	}
	s.conn = conn
	s.vec, _ = conn.(transport.FramesWriter)
	if sp, ok := conn.(transport.Splicer); ok && p.comp == nil && p.cfg.zeroCopyMin > 0 && sp.Splicing() {
		p.sessions++
		s.splice, s.serial = sp, p.sessions
	}
	s.window = connWindow(p.cfg.framesInFlight, s.vec != nil)
	p.setSession(s)
	if err := p.handshake(s); err != nil {
		conn.Close()
		p.setSession(nil)
		return nil, EventHandshakeFailed, err
	}
	return s, EventConnected, nil
}

func (p *Producer) handshake(s *session) error {
	hello, err := s.hello(p.incarnation)
	if err != nil {
		return wrap(ErrHandshake, err)
	}
	if err := s.conn.WriteFrame(&transport.Buffer{Bytes: hello}); err != nil {
		// A broker that refuses a connection on sight (too many
		// connections) answers with an ERROR and closes before the HELLO
		// is written: that ERROR, delivered before the close, says why.
		if why := s.reason(); why != nil {
			err = why
		}
		return wrap(ErrHandshake, err)
	}
	t := p.clock.NewTimer(p.cfg.handshakeTimeout)
	defer t.Stop()
	var ok wire.HelloOK
	select {
	case ok = <-s.helloOK:
	case <-s.dead:
		return wrap(ErrHandshake, s.reason())
	case <-t.C():
		return fmt.Errorf("%w: no HELLO_OK within %v", ErrHandshake, p.cfg.handshakeTimeout)
	case <-p.stop:
		return ErrClosed
	}

	if p.incarnation != 0 && ok.Epoch != p.incarnation {
		return fmt.Errorf("%w: HELLO_OK of epoch %d answers a HELLO of epoch %d", ErrHandshake, ok.Epoch, p.incarnation)
	}
	p.incarnation = ok.Epoch
	s.epoch = ok.Epoch
	s.maxFrame = min(int(ok.MaxFrameSize), p.cfg.maxFrameSize)
	s.inbound.Store(p.preciseNow())
	s.ready.Store(true)
	p.lastFail.Store(nil)
	return nil
}

// abort fails every message pending now, in every lane, with err, before
// its deadline: the broker refused the producer in a way that cannot heal
// by waiting.
func (p *Producer) abort(err error) {
	for _, l := range p.lanesSnapshot() {
		l.abort(err)
	}
}

// abort fails every message pending in l now with err.
func (l *lane) abort(err error) {
	l.abortErr.Store(&err)
	_, tail := l.led.bounds()
	l.led.failBelow(tail, ringbuf.Aborted)
}

// afterFailure acts on why a connection attempt failed or a connection
// ended, when that is more than a reason to redial: it reports false when
// the pump must stop for good (the producer was fenced).
//
//	ErrFenced             Fencing, Exclusive: fence (every message fails, sends fail, no more dials)
//	                      WaitForName: yield (written messages fail; redial for a new epoch)
//	ErrNameInUse          Exclusive: every pending message fails; the others just redial
//	ErrSequenceExhausted  every pending message fails
func (p *Producer) afterFailure(err error) bool {
	var refusal *brokerError
	errors.As(err, &refusal)
	switch {
	case refusal != nil && refusal.kind == ErrFenced:
		if p.cfg.access == WaitForName {
			return p.yield(refusal)
		}
		p.fence(refusal)
		return false
	case refusal != nil && refusal.kind == ErrNameInUse:
		if p.cfg.access == Exclusive {
			p.abort(refusal)
		}
	case errors.Is(err, ErrSequenceExhausted):
		p.abort(err)
	}
	return true
}

// fence ends the producer as a writer: a newer instance of its name took
// it over. Every pending message fails with err; the ledger is closed, so
// that later sends fail at once (enqueue returns err for the closed
// ledger's ErrClosed until Close).
func (p *Producer) fence(err error) {
	p.lanesMu.Lock() // no lane is made from now on (see newLane)
	p.fenced.Store(&err)
	lanes := p.lanesSnapshot()
	p.lanesMu.Unlock()
	for _, l := range lanes {
		l.led.close() // before the tail is read: a send either fails or is below it
		l.abort(err)
	}
}

// yield gives the name up under WaitForName after a fence: in every lane,
// the messages written under the fenced epoch and not acknowledged fail
// with err (the broker may have stored them: resending them under a new
// epoch could store them twice); once the dispatcher delivered every
// position below maxWritten, the next HELLO asks for a new epoch, and each
// lane's next TOPIC_OK moves its seqBase so that the messages never
// written get sequence IDs after the topic's last stored one
// (ledger.handshake). It reports false if the producer is stopping.
func (p *Producer) yield(err error) bool {
	lanes := p.lanesSnapshot()
	written := make([]uint64, len(lanes))
	for i, l := range lanes {
		l.abortErr.Store(&err)
		written[i] = l.led.maxWritten.Load()
		l.led.failBelow(written[i], ringbuf.Aborted)
		l.fresh = true
	}
	p.incarnation = 0
	select {
	case <-p.stop:
		return false
	default:
	}
	for i, l := range lanes {
		if !l.led.releasedBelow(written[i], p.stop) {
			return false
		}
	}
	return true
}

// writeLoop serves every lane with something to write, one batch per lane
// in turn, until the session dies or the producer stops. A lane is
// declared on the connection (TOPIC) the first time it has something to
// write there; its batches follow its TOPIC_OK. Lanes are independent: a
// lane whose window is full, whose declaration is pending or refused, or
// that lingers, waits on its own while the others are written.
func (p *Producer) writeLoop(s *session, bufs *bufPool) {
	var bb wire.BatchBuilder
	var work, later []*lane
	// Every lane that holds messages may have some to (re)send here.
	for _, l := range p.lanesSnapshot() {
		if head, tail := l.led.bounds(); head < tail {
			l.pumpQueued.Store(true)
			work = p.enter(work, l)
		}
	}
	var answers []topicAnswer
	defer s.endPass() // a pass the session's end cut short
	lastForget := p.preciseNow()
	s.parkTimer = p.clock.NewTimer(p.cfg.topicIdle)
	defer s.parkTimer.Stop()
	for {
		if s.isDead() || p.stopping() {
			p.leave(s, work, later)
			return
		}
		p.pumpPasses.Add(1)
		answers = s.takeAnswers(answers[:0])
		for _, a := range answers {
			if l := p.answered(s, a); l != nil {
				work = p.enter(work, l)
			}
		}
		for _, l := range p.pumpDirty.take(nil) {
			work = p.enter(work, l)
		}
		now := p.preciseNow()
		if len(later) > 0 {
			kept := later[:0]
			for _, l := range later {
				if l.notBefore <= now {
					work = p.enter(work, l)
				} else {
					kept = append(kept, l)
				}
			}
			later = kept
		}
		kept := work[:0]
		drainedAny := false // a lane left for want of published messages
		for _, l := range work {
			switch p.serve(s, l, &bb, bufs, now) {
			case keep:
				kept = append(kept, l)
			case wait:
				l.inWork = false
				later = append(later, l)
			case drop:
				l.inWork = false
			case drained:
				l.inWork = false
				drainedAny = true
			case noRoom:
				// Out of work until there is room in the connection's
				// window: the pump brings it back below when other lanes'
				// receipts make some, a receipt of its own through
				// kickRoom. Senders' kicks do not (see lane.waiting).
				l.inWork = false
				if !l.roomy {
					l.roomy = true
					s.roomWait = append(s.roomWait, l)
				}
				p.park(s, l) // counts its frames again: the room a receipt made is there below
			case parked:
				l.inWork = false
			case dead:
				p.leave(s, work, later)
				return
			}
		}
		clear(work[len(kept):])
		work = kept
		err := s.flush()
		s.endPass()
		if err != nil {
			s.fail(err)
			p.leave(s, work, later)
			return
		}
		// As many lanes as there is room for, in the order they waited
		// (all of them at every pass would cost each pass every waiting
		// lane, to let a few through), each with a place kept for it until
		// its serve: a lane kept in work from this pass, which serve
		// reaches first, takes none of those places.
		for room := s.window - s.flying - s.reserved; room > 0 && len(s.roomWait) > 0; room-- {
			l := s.roomWait[0]
			s.roomWait[0] = nil
			s.roomWait = s.roomWait[1:]
			l.roomy, l.admitted = false, true
			s.reserved++
			l.waiting.Store(false) // a kickRoom that swapped it first pushed it too: enter keeps one
			work = p.enter(work, l)
		}
		if len(s.roomWait) == 0 {
			s.roomWait = nil
		}
		if now-lastForget >= int64(p.cfg.topicIdle)/2 {
			p.forgetIdle(now)
			lastForget = now
		}
		if len(work) == 0 && !p.parkPump(s, later, drainedAny) {
			p.leave(s, work, later)
			return
		}
	}
}

// enter adds l to the pump's work list unless it is in it.
func (p *Producer) enter(work []*lane, l *lane) []*lane {
	if l.inWork {
		return work
	}
	l.inWork = true
	if !l.pumpQueued.Load() { // a store only when needed: senders read the line
		l.pumpQueued.Store(true)
	}
	return append(work, l)
}

// leave clears the pump's hold on the lanes of a session that ended: their
// flags are set again when the next session puts them to work.
func (p *Producer) leave(s *session, work, later []*lane) {
	clear(s.out) // never written: no payload kept alive through them
	s.out = s.out[:0]
	for _, l := range s.parked {
		if !l.listed {
			continue // forgotten (see retire)
		}
		l.listed = false
		l.waiting.Store(false)
		l.pumpQueued.Store(false)
	}
	for _, l := range s.roomWait {
		l.roomy = false
		l.pumpQueued.Store(false)
	}
	// Lanes keep a pointer to the connection they were last served on:
	// it must not keep forgotten ones alive through its lists.
	s.parked, s.parkedGone, s.roomWait = nil, 0, nil
	for _, l := range work {
		l.inWork = false
		l.pumpQueued.Store(false)
	}
	for _, l := range later {
		l.pumpQueued.Store(false)
	}
}

// served says what the pump does with a lane after serving it.
type served uint8

const (
	keep    served = iota // it has more to write now
	wait                  // it has more, not before l.notBefore
	drop                  // nothing to do until a kick (publish, receipt) or an answer
	drained               // nothing published to write: drop, until a publish kicks it
	noRoom                // it waits for room in the connection's window
	parked                // it waits for room in its own window (see lane.waiting)
	dead                  // the session died
)

// serve writes at most one batch of l on s.
func (p *Producer) serve(s *session, l *lane, bb *wire.BatchBuilder, bufs *bufPool, now int64) served {
	if l.conn != s {
		l.conn, l.state, l.pos, l.counted, l.roomy, l.admitted = s, undeclared, 0, 0, false, false
		l.ground()
	}
	// A place kept for l (see admit) is its to use at this serve, or
	// lost: a lane that has nothing to write, or waits for something
	// else, asks again when it needs room.
	admitted := l.admitted
	if admitted {
		l.admitted = false
		s.reserved--
	}
	l.pos = max(l.pos, l.led.resendFrom())
	open := p.windowOpen(s, l) // first: a lane kicked by its receipt gives its room back even with nothing to write
	if !l.led.ring.Published(l.pos) {
		return p.idleLane(s, l)
	}
	switch l.state {
	case declaring:
		return drop // its answer puts it back
	case undeclared:
		if l.notBefore > now {
			return wait
		}
		if err := p.declare(s, l); err != nil {
			s.fail(err)
			return dead
		}
		return drop
	}
	if l.pos >= l.endPos {
		// A message is published whose sequence ID would be beyond
		// wire.MaxSeq: nothing more can be sent on this topic under this
		// name. Out of work until the next publish or receipt, which
		// fails the same way: the flag goes first, so that a publish the
		// abort does not see (beyond the tail it reads) kicks l again
		// rather than wait for its deadline.
		l.pumpQueued.Store(false)
		l.abort(fmt.Errorf("%w: sequence IDs of topic %q reached %d", ErrSequenceExhausted, l.topic, uint64(wire.MaxSeq)))
		return drop
	}
	if !open {
		if p.park(s, l) && l.waiting.CompareAndSwap(true, false) {
			return keep // a receipt or release came before the park
		}
		return parked
	}
	full := s.flying >= s.window
	if !admitted {
		full = full || s.flying+s.reserved >= s.window || len(s.roomWait) > 0
	}
	if full && l.weight+lookAhead(l) < frameUnits*p.cfg.framesInFlight {
		// No room, or lanes wait for it and l did not: it waits behind
		// them. First come, first served: a lane whose frame was just
		// acknowledged would otherwise take every place that opens, with
		// the few messages it has, while the lanes that waited grow big
		// frames that never leave (small frames are what cost: on tcp a
		// fair window took 1000 topics from frames of 40 messages to 105,
		// and 1.5 times the throughput). A lane a frame, or two frames
		// of its last frame's weight (closed by a byte bound), short of
		// filling its own window goes on: the frame that fills it takes
		// no room (see count), and at most one more is counted beyond the
		// connection's window until then.
		return noRoom
	}
	if p.cfg.linger > 0 && !l.led.ring.Published(l.pos+uint64(lingerFor(l, p.cfg.maxBatchMessages))-1) {
		if l.notBefore == 0 {
			l.notBefore = now + int64(p.cfg.linger)
		}
		if now < l.notBefore {
			return wait
		}
	}
	l.notBefore = 0
	buf := bufs.get()
	asBuilt := p.comp == nil // frames go as nextBatch builds them
	lim := batchLimits{topic: l.id, messages: p.cfg.maxBatchMessages, bytes: p.cfg.maxBatchBytes, frame: s.maxFrame, end: l.endPos,
		sum: asBuilt}
	if asBuilt && s.vec != nil {
		lim.cached = cachedFrameBytes // see cachedFrameBytes
	}
	if s.splice != nil {
		lim.splice, lim.pass = p.cfg.zeroCopyMin, &s.pass
	}
	var n int
	var closedAt int
	l.pos, n, closedAt = l.led.nextBatch(bb, l.pos, lim, p.preciseNow())
	if n == 0 {
		bufs.put(buf)
		return keep
	}
	rawLen := bb.Size()
	buf.Bytes = bb.Take(p.comp, buf.Bytes)
	buf.Splices = bb.TakeSplices(buf.Splices)
	p.stats.sent.Add(uint64(n))
	p.stats.batches.Add(1)
	p.stats.bytesRaw.Add(uint64(rawLen))
	p.stats.bytesWire.Add(uint64(buf.Len()))
	if err := s.emit(buf); err != nil {
		s.fail(err)
		return dead
	}
	w := frameUnits
	if closedAt > 0 {
		w = fullWeight(max(closedAt, rawLen))
	}
	l.noteFrame(n, closedAt, rawLen, p.cfg.maxBatchMessages)
	l.fly(l.pos, w)
	p.count(s, l)
	return keep
}

// park marks l waiting for room (see lane.waiting), its pumpQueued left
// set, and lists it for leave; then it counts l's frames done again and
// reports whether l's own window has room (windowOpen). A receipt or
// release since serve counted them found l not waiting, and its kick was
// lost on the flag l holds: the count after the mark sees it (one after
// the mark kicks l), so that a lane whose window opened meanwhile is not
// left parked, and the room it made in the connection's window is there
// for the lanes waiting for some (as in idleLane).
func (p *Producer) park(s *session, l *lane) bool {
	l.waiting.Store(true)
	if !l.listed {
		l.listed = true
		s.parked = append(s.parked, l)
	}
	return p.windowOpen(s, l)
}

// idleLane takes l, with nothing published at l.pos, out of the pump's
// work until a kick: it clears l's flag, then looks again, so that a
// publish (whose kick found the flag still set) between the pump's look
// and the clear is not lost. A receipt in that gap is not lost either: it
// counts its frames done again (windowOpen), after the clear, so that
// room it made in the connection's window is there for the lanes waiting
// for some (a receipt's kick that found the flag set did nothing, and
// nothing else would count it: with every other lane waiting, the pump
// parked for good).
func (p *Producer) idleLane(s *session, l *lane) served {
	l.pumpQueued.Store(false)
	p.windowOpen(s, l)
	if l.led.ring.Published(l.pos) && l.pumpQueued.CompareAndSwap(false, true) {
		return keep
	}
	return drained
}

// windowOpen reports whether l's window has room: its frames written on s
// and not yet done with take less than MaxFramesInFlight frames' worth (see
// flight). A frame is done once the lane's acked cursor reached its end
// (receipts are cumulative) or every message in it resolved otherwise (a
// deadline) and was released.
func (p *Producer) windowOpen(s *session, l *lane) bool {
	if l.land(l.led.resendFrom()) {
		p.count(s, l)
	}
	return !p.windowFull(l)
}

// lookAhead is how close to filling its own window l may be to go on
// while the connection's window is full (see serveLane): two frames of the
// weight of its last one, at most a whole frame's place.
func lookAhead(l *lane) int {
	if n := len(l.inFlight); n > 0 {
		return min(frameUnits, 2*l.inFlight[n-1].weight)
	}
	return frameUnits
}

// lingerFor is how many published records make a frame of l worth sending
// at once under Linger: maxMessages (MaxBatchMessages), or fewer if l's
// last full frame was closed by a byte bound at fewer (a frame that size
// would close anyway, and a wait for more would only delay it).
func lingerFor(l *lane, maxMessages int) int {
	if l.fullAt > 0 {
		return min(maxMessages, l.fullAt)
	}
	return maxMessages
}

// noteFrame records how l's frame of n records and size bytes, closed at
// the byte bound closedAt (0: none), ended, for lingerFor. A frame a byte
// bound closed holds a full frame's worth, unless it is a message beyond
// the bound alone (size over it), which says nothing of the others. A
// frame that reached maxMessages, or that held a full frame's worth of
// records in less than half that frame's bytes, says the records got
// smaller: a full frame is maxMessages again, until a bound closes one (so
// that a lingered frame holds at least half a bound's bytes). The pump's.
func (l *lane) noteFrame(n, closedAt, size, maxMessages int) {
	switch {
	case closedAt > 0 && size <= closedAt:
		l.fullAt, l.fullBytes = n, size
	case closedAt > 0:
	case n >= maxMessages || l.fullAt > 0 && n >= l.fullAt && 2*size < l.fullBytes:
		l.fullAt = 0
	}
}

// windowFull reports whether l's frames in flight fill its own window.
func (p *Producer) windowFull(l *lane) bool {
	return l.weight >= frameUnits*p.cfg.framesInFlight
}

// count brings l's share of s.flying up to date: its frames in flight,
// none while its own window is full (a lane the broker holds back does not
// take the other lanes' room).
func (p *Producer) count(s *session, l *lane) {
	n := len(l.inFlight)
	if p.windowFull(l) {
		n = 0
	}
	s.flying += n - l.counted
	l.counted = n
}

// declare sends l's TOPIC on s: its id on s is the one it had there, or a
// new one.
func (p *Producer) declare(s *session, l *lane) error {
	id, ok := s.ids[l.topic]
	if !ok {
		id = uint32(len(s.ids) + 1)
		s.ids[l.topic] = id
		s.declared.Store(id)
	}
	l.id = id
	s.byID.Store(id, l)
	frame, err := wire.AppendTopic(nil, wire.Topic{ID: id, Name: l.topic})
	if err != nil {
		return err
	}
	l.state = declaring
	return s.emit(&transport.Buffer{Bytes: frame})
}

// answered acts on the broker's answer to a TOPIC and returns the lane to
// put to work, if any.
func (p *Producer) answered(s *session, a topicAnswer) *lane {
	v, ok := s.byID.Load(a.id)
	if !ok {
		s.fail(fmt.Errorf("%w: %v for topic id %d, never declared", ErrProtocol, a.typ, a.id))
		return nil
	}
	l := v.(*lane)
	// A TOPIC_OK answers a declaration; a TOPIC_ERROR too, or ends a
	// declared topic whose store failed: what it had written and not
	// acknowledged is written again after the next TOPIC_OK.
	if l.conn != s || l.retired.Load() || l.state == undeclared || (a.err == nil && l.state != declaring) {
		s.fail(fmt.Errorf("%w: %v for topic %q, not declaring", ErrProtocol, a.typ, l.topic))
		return nil
	}
	if a.err != nil {
		l.state, l.pos = undeclared, 0
		l.ground()
		p.count(s, l) // its frames were dropped: they take no room any more
		if a.err.kind == ErrUnauthorized || a.err.kind == ErrFenced {
			// It cannot heal by waiting: the topic's messages fail now;
			// its next message declares it again.
			p.report(a.err)
			l.abort(a.err)
			l.retries = 0
			return l
		}
		// Store trouble: declare it again after a backoff; its messages
		// wait, within their deadlines.
		p.report(a.err)
		l.retries++
		l.notBefore = p.preciseNow() + int64(min(p.cfg.backoffMin<<min(l.retries, 16), p.cfg.backoffMax))
		return l
	}
	lost, err := l.led.handshake(a.lastSeq, l.fresh)
	if err != nil {
		if errors.Is(err, ErrSequenceExhausted) {
			l.state = undeclared
			l.abort(err)
			return l
		}
		s.fail(err)
		return nil
	}
	if lost != nil {
		p.report(fmt.Errorf("topic %q: %w", l.topic, lost))
	}
	l.fresh, l.retries = false, 0
	l.endPos = wire.MaxSeq - l.led.seqBase.Load() // seq(endPos) = MaxSeq+1 (see ledger.seqBase)
	l.state = declared
	l.pumpQueued.Store(true)
	return l
}

// forgetIdle forgets the lanes that have had nothing pending for
// TopicIdleTimeout (see retire).
func (p *Producer) forgetIdle(now int64) {
	idle := int64(p.cfg.topicIdle)
	for _, l := range p.lanesSnapshot() {
		if l == p.def || l.inWork || l.state == declaring || l.retired.Load() || now-l.lastUsed.Load() < idle {
			continue
		}
		p.retire(l)
	}
}

// parkPump waits until a lane may have work, an answer arrives, a lane in
// later is due, or (false) the session dies or the producer stops. With
// yield, a lane ran out of published messages in the last pass: the pump
// yields a few times first.
func (p *Producer) parkPump(s *session, later []*lane, yield bool) bool {
	var due int64
	for _, l := range later {
		if due == 0 || l.notBefore < due {
			due = l.notBefore
		}
	}
	forget := p.cfg.topicIdle / 2
	wait := forget
	if due != 0 {
		wait = min(wait, max(time.Duration(due-p.preciseNow()), 0))
	}
	// A sender is often about to publish to a lane the pump drained:
	// yield a few times before parking, which costs the sender a wake-up
	// (as the ring's own wait does). Not when every lane waits for room
	// or for its time: only a receipt, a release or the timer gives work
	// then, and a yielding pump waits behind the goroutines it yields to
	// (on two busy cores traces showed it 0.6 ms late at p90), while a
	// parked one, woken by the receipt's goroutine, runs when that one
	// blocks (Topics/mem/topics=1 in shuffled rounds: 56.4 → 52.2 ns per
	// message; 1000 topics level).
	for i := 0; yield && i < spinTries; i++ {
		p.pumpYields.Add(1)
		runtime.Gosched()
		if !p.pumpDirty.empty() || s.hasAnswers() {
			return true
		}
	}
	p.pumpParked.Store(true)
	defer p.pumpParked.Store(false)
	if !p.pumpDirty.empty() || s.hasAnswers() {
		return true
	}
	s.parkTimer.Reset(wait)
	defer s.parkTimer.Stop()
	select {
	case <-p.pumpWake:
	case <-s.parkTimer.C():
	case <-s.dead:
		return false
	case <-p.stop:
		return false
	}
	return true
}

// spinTries is how many times the pump yields before it parks, after a
// pass that drained a lane (see parkPump).
const spinTries = 4
