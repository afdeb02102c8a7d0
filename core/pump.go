package core

import (
	"context"
	"errors"
	"fmt"
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
	// One buffer per frame the window lets be in flight: a frame's buffer
	// comes back when the transport has written it, before its receipt,
	// so the window, not the pool, is what makes the pump wait.
	bufs := make(chan *transport.Buffer, p.cfg.framesInFlight)
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
		p.event(Event{Kind: EventConnected, LastSeq: s.lastSeq, Epoch: s.epoch, Reconnect: connected})
		connected = true
		var hb sync.WaitGroup
		hb.Go(s.heartbeat)
		p.writeLoop(s, refill(bufs))
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

// refill tops the buffer pool up to its capacity. Buffers a dead
// connection never released are replaced; if one comes back late it is
// dropped (the channel is full) or reused.
func refill(bufs chan *transport.Buffer) chan *transport.Buffer {
	for len(bufs) < cap(bufs) {
		bufs <- &transport.Buffer{Owner: bufs}
	}
	return bufs
}

// giveBack returns an unused buffer to the pool. The pool may be full
// already: a buffer a dead connection held came back late (see refill).
func giveBack(bufs chan *transport.Buffer, buf *transport.Buffer) {
	select {
	case bufs <- buf:
	default:
	}
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

	fresh := p.incarnation == 0
	if !fresh && ok.Epoch != p.incarnation {
		return fmt.Errorf("%w: HELLO_OK of epoch %d answers a HELLO of epoch %d", ErrHandshake, ok.Epoch, p.incarnation)
	}
	lost, err := p.led.handshake(ok.LastSeq, fresh)
	if err != nil {
		return err
	}
	if lost != nil {
		p.report(lost)
	}
	p.incarnation = ok.Epoch
	s.lastSeq, s.epoch = ok.LastSeq, ok.Epoch
	s.endPos = wire.MaxSeq - p.led.seqBase.Load() // seq(endPos) = MaxSeq+1 (see ledger.seqBase)
	s.maxFrame = min(int(ok.MaxFrameSize), p.cfg.maxFrameSize)
	s.inbound.Store(p.preciseNow())
	s.ready.Store(true)
	p.lastFail.Store(nil)
	return nil
}

// abort fails every message pending now with err, before its deadline: the
// broker refused the producer in a way that cannot heal by waiting.
func (p *Producer) abort(err error) {
	p.abortErr.Store(&err)
	_, tail := p.led.bounds()
	p.led.failBelow(tail, ringbuf.Aborted)
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
	p.fenced.Store(&err)
	p.led.close() // before the tail is read: a send either fails or is below it
	p.abort(err)
}

// yield gives the name up under WaitForName after a fence: the messages
// written under the fenced epoch and not acknowledged fail with err (the
// broker may have stored them: resending them under a new epoch could
// store them twice); once the dispatcher delivered every position below
// maxWritten, the next HELLO asks for a new epoch, and its HELLO_OK moves
// seqBase so that the messages never written get sequence IDs after the
// name's last stored one (ledger.handshake). It reports false if the
// producer is stopping.
func (p *Producer) yield(err error) bool {
	p.abortErr.Store(&err)
	written := p.led.maxWritten.Load()
	p.led.failBelow(written, ringbuf.Aborted)
	p.incarnation = 0
	select {
	case <-p.stop:
		return false
	default:
	}
	return p.led.releasedBelow(written, p.stop)
}

// writeLoop writes batches from the oldest unresolved position on, until the
// session dies or the producer stops.
func (p *Producer) writeLoop(s *session, bufs chan *transport.Buffer) {
	var bb wire.BatchBuilder
	lim := batchLimits{messages: p.cfg.maxBatchMessages, bytes: p.cfg.maxBatchBytes, frame: s.maxFrame, end: s.endPos}
	var pos uint64
	for {
		// Start, and go on, at the oldest position that may be unresolved:
		// positions below head were resolved and may already hold newer
		// messages, so never look below it.
		pos = max(pos, p.led.resendFrom())
		switch p.led.waitPublished(pos, s.dead, nil) {
		case waitEnded:
			return
		case ledgerDone:
			// Closed and everything written: wait for the end.
			select {
			case <-s.dead:
			case <-p.stop:
			}
			return
		}
		if pos >= s.endPos {
			// A message is published whose sequence ID would be beyond
			// wire.MaxSeq: nothing more can be sent under this name.
			s.fail(fmt.Errorf("%w: sequence IDs of this name reached %d", ErrSequenceExhausted, uint64(wire.MaxSeq)))
			return
		}
		if !p.awaitWindow(s) {
			return
		}
		var buf *transport.Buffer
		select {
		case buf = <-bufs:
		default:
			select {
			case buf = <-bufs:
			case <-s.dead:
				return
			case <-p.stop:
				return
			}
		}
		if p.cfg.linger > 0 && !p.linger(s, pos) {
			giveBack(bufs, buf)
			return
		}
		var n int
		pos, n = p.led.nextBatch(&bb, pos, lim, p.preciseNow())
		if n == 0 {
			giveBack(bufs, buf)
			continue
		}
		rawLen := bb.Size()
		buf.Bytes = bb.Take(p.comp, buf.Bytes)
		p.stats.sent.Add(uint64(n))
		p.stats.batches.Add(1)
		p.stats.bytesRaw.Add(uint64(rawLen))
		p.stats.bytesWire.Add(uint64(len(buf.Bytes)))
		if err := s.conn.WriteFrame(buf); err != nil {
			s.fail(err)
			return
		}
		s.inFlight = append(s.inFlight, pos)
	}
}

// awaitWindow waits until fewer than MaxFramesInFlight frames written on s
// wait for their receipt. A frame is acknowledged once the ledger's acked
// cursor reached its end (receipts are cumulative). It returns false if the
// session died or the producer is stopping.
func (p *Producer) awaitWindow(s *session) bool {
	for {
		acked := p.led.acked.Load()
		done := 0
		for done < len(s.inFlight) && s.inFlight[done] <= acked {
			done++
		}
		if done > 0 {
			s.inFlight = s.inFlight[:copy(s.inFlight, s.inFlight[done:])]
		}
		if len(s.inFlight) < p.cfg.framesInFlight {
			return true
		}
		// A receipt arriving after the load above leaves a token: no
		// wake-up is lost.
		select {
		case <-s.receipt:
		case <-s.dead:
			return false
		case <-p.stop:
			return false
		}
	}
}

// linger waits, up to Linger, until a full batch is published from pos. It
// returns false if the session died or the producer is stopping.
func (p *Producer) linger(s *session, pos uint64) bool {
	last := pos + uint64(p.cfg.maxBatchMessages) - 1
	t := p.clock.NewTimer(p.cfg.linger)
	defer t.Stop()
	if p.led.waitPublished(last, s.dead, t.C()) == waitEnded {
		return false
	}
	return !p.stopping()
}
