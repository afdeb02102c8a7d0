package core

import (
	"context"
	"errors"
	"fmt"

	"github.com/inflightmq/inflight/ringbuf"
)

// dispatcher is a lane's state of the callback goroutine. There is one
// such goroutine at a time: New starts it, and if a callback ends it with
// runtime.Goexit, a new one takes over this state where the old one stopped
// (see call). Only the current dispatcher goroutine touches these fields.
type dispatcher struct {
	next  uint64   // every position below was delivered (and may be released)
	fails []uint64 // failed positions taken from the queue, not yet delivered
	spare []uint64 // the backing array of the last taken queue, for reuse
}

// dispLanes is the callback goroutine's list of lanes to serve, kept
// across a Goexit (see call).
type dispLanes struct {
	work []*lane
	// What the last detachPayloads left detached: the session's serial,
	// and its spliced count then.
	detached detachMemo
}

// runDispatcher runs every callback, on this one goroutine, for every lane
// its ledger woke it for (see wakeDispatcher):
//
//   - in order from head: each position that is resolved (acked, rejected
//     or failed) gets its callback, then head moves past it; it stops at the
//     first position still pending;
//   - out of order: positions that failed beyond that point (deadline,
//     context, Close) are queued by whoever failed them, and get their
//     callback at once, then are marked Done so the in-order walk skips
//     them.
//
// Lanes are independent: a lane whose oldest message waits for its receipt
// holds up no other lane's callbacks. After Close closed stopDisp, it
// delivers what is left (everything is resolved by then), closes closed
// and returns.
func (p *Producer) runDispatcher() {
	p.dispGoid.Store(goid())
	d := &p.disp
	// A goroutine that took over from one a callback ended (see call)
	// resumes every lane: the lane it was serving left the list.
	for _, l := range p.lanesSnapshot() {
		p.serveLane(l)
	}
	for {
		d.work = p.dispDirty.take(d.work)
		for len(d.work) > 0 {
			l := d.work[0]
			d.work[0] = nil
			d.work = d.work[1:]
			l.dispQueued.Store(false) // a wake from now on queues it again
			p.serveLane(l)
		}
		d.work = d.work[:0]
		select {
		case <-p.stopDisp:
			if p.idle() {
				close(p.closed)
				return
			}
			// A lane whose wake was taken by a goroutine that exited:
			// serve every lane once more.
			for _, l := range p.lanesSnapshot() {
				p.serveLane(l)
			}
			if p.idle() {
				close(p.closed)
				return
			}
		default:
		}
		select {
		case <-p.dispatchWake:
		case <-p.stopDisp:
		}
	}
}

// serveLane delivers what l has ready.
func (p *Producer) serveLane(l *lane) {
	d := &l.disp
	deliver := func(pos uint64, st ringbuf.State) { p.deliver(l, pos, st) }
	l.led.deliverFails(&d.fails, d.next, deliver) // left by a goroutine that exited
	d.fails = l.led.takeFails(d.spare)
	d.spare = d.fails
	l.led.deliverFails(&d.fails, d.next, deliver)
	head := l.led.ring.Head()
	l.led.walk(&d.next, deliver)
	if l.led.ring.Head() != head {
		// Released: frames of it in flight may be done with (see
		// windowOpen), which only the pump counts.
		p.kickRoom(l)
	}
}

// idle reports whether no lane holds a message.
func (p *Producer) idle() bool {
	for _, l := range p.lanesSnapshot() {
		if head, tail := l.led.bounds(); head < tail {
			return false
		}
	}
	return true
}

// onDispatcher reports whether the caller runs on the callback goroutine,
// that is, inside a callback.
func (p *Producer) onDispatcher() bool { return goid() == p.dispGoid.Load() }

// outcome returns what a message resolved in state st reports; ctx is the
// message's context (nil if it could not end). A timeout (of SendTimeout or
// of ctx's deadline) or ErrClosed names the last connection failure if the
// producer has no connection now.
func (p *Producer) outcome(l *lane, pos uint64, st ringbuf.State, ctx context.Context) (MessageID, error) {
	switch st {
	case ringbuf.Acked:
		return MessageID(l.led.seq(pos)), nil
	case ringbuf.Expired:
		return 0, p.timeout()
	case ringbuf.Canceled:
		return 0, p.ctxFailure(ctx)
	case ringbuf.Rejected:
		return 0, ErrMessageTooLarge
	case ringbuf.Aborted:
		return 0, *l.abortErr.Load()
	default:
		if f := p.lastFail.Load(); f != nil {
			return 0, f.closed
		}
		return 0, ErrClosed
	}
}

// timeout is what a message whose SendTimeout elapsed reports, or a send
// that waited for room until then returns: ErrTimeout, naming the last
// connection failure if the producer has no connection now.
func (p *Producer) timeout() error {
	if f := p.lastFail.Load(); f != nil {
		return f.timeout
	}
	return ErrTimeout
}

// ctxFailure is what a message whose context ended reports, or a send that
// waited for room until it ended returns: for a deadline, a timeout like
// SendTimeout's (errDeadline: it matches ErrTimeout and
// context.DeadlineExceeded), naming the last connection failure if the
// producer has no connection now; else the context's error.
func (p *Producer) ctxFailure(ctx context.Context) error {
	err := ctx.Err()
	if !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if f := p.lastFail.Load(); f != nil {
		return f.deadline
	}
	return errDeadline
}

// deliver runs the callback of pos, resolved in state st, and counts it in
// Stats (a success was counted by the walk, before). A Send's position has
// no callback: its Send was notified when it resolved.
func (p *Producer) deliver(l *lane, pos uint64, st ringbuf.State) {
	if p.closing.Load() {
		p.closingCalls.Add(1) // Close watches callbacks start (see awaitCallbacks)
	}
	e := l.led.entryAt(pos)
	if e.hook != nil {
		e.hook.stop()
	}
	id, err := p.outcome(l, pos, st, e.ctx())
	if st != ringbuf.Acked && st != ringbuf.Rejected && e.cb != nil { // a failure: its frame may be being written (a Send detaches itself)
		p.detachPayloads(&p.disp.detached)
	}
	switch st {
	case ringbuf.Acked:
		// Counted by the walk, before (see ledger.walk).
	case ringbuf.Expired:
		p.stats.timedOut.Add(1)
	case ringbuf.Canceled:
		p.stats.canceled.Add(1)
	default:
		p.stats.failed.Add(1)
	}
	if e.cb == nil {
		l.led.waitNotified(pos)
		return
	}
	p.call(e.cb, id, e.msg, err)
}

// call runs one callback. A panic is recovered and reported. A callback
// that ends its goroutine (runtime.Goexit, as t.FailNow does) cannot be
// stopped from doing so: a new dispatcher goroutine takes over, reported
// with ErrCallbackExit, and carries on from the next position.
func (p *Producer) call(cb Callback, id MessageID, msg *Message, err error) {
	returned := false
	defer func() {
		if returned {
			return
		}
		if v := recover(); v != nil {
			p.report(fmt.Errorf("%w: %v", ErrCallbackPanic, v))
			return
		}
		p.report(ErrCallbackExit)
		p.dispWG.Go(p.runDispatcher)
	}()
	cb(id, msg, err)
	returned = true
}

// detachMemo is what a caller of detachPayloads keeps between calls: the
// serial of the session it last detached, and that session's spliced
// count then.
type detachMemo struct {
	serial uint64
	n      uint64
}

// detachPayloads makes sure that no connection reads the payload of a
// message that resolved before the call, so that its callback may run (or
// its Send return) and its caller have the payload back (see ZeroCopyMin):
// it waits for the pump's pass that may hold frames referring to payloads
// and not yet handed over (session.pass), then has the current connection
// copy what it has not written of the frames with splices it holds
// (transport.Splicer's Detach). A message whose payload a frame refers
// to was marked written in a pass that then held pass (until then only
// the pump could resolve it), and is never written by reference again
// (resends copy): once that pass ended its frames are the connection's,
// or were never handed over. Earlier connections read no payload: the pump closes
// a connection before it makes another session, and Close returns once
// nothing reads a splice. memo (nil: none) skips the Detach when no pass
// referred to payloads since the last one on the same session; a session
// where none did needs none. Not on the pump's goroutine: the
// dispatcher's, or Send's caller's.
func (p *Producer) detachPayloads(memo *detachMemo) {
	p.sessionMu.Lock()
	s := p.session
	p.sessionMu.Unlock()
	if s == nil || s.splice == nil {
		return
	}
	s.pass.mu.Lock() // the pass ends: it never waits for this goroutine
	n := s.spliced.Load()
	s.pass.mu.Unlock()
	if n == 0 || memo != nil && memo.serial == s.serial && memo.n == n {
		return
	}
	s.splice.Detach()
	if memo != nil {
		*memo = detachMemo{s.serial, n}
	}
}
