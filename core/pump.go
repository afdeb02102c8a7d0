package core

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/inflightmq/inflight/ringbuf"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/wire"
)

// framesInFlight is how many BATCH frames the pump lets a connection hold
// before it waits for one to come back: the producer's own window, so a
// transport without backpressure cannot make it buffer without bound.
const framesInFlight = 4

// runPump is the connection supervisor and the writer: dial, handshake,
// write batches until the connection dies, back off, again, until Close.
func (p *Producer) runPump() {
	bufs := make(chan *transport.Buffer, framesInFlight)
	backoff := p.cfg.backoffMin
	connected := false
	for !p.stopping() {
		s, err := p.connect()
		if err != nil {
			if p.stopping() {
				return
			}
			p.report(err)
			// Full jitter: anywhere in [min, backoff].
			d := p.cfg.backoffMin + rand.N(backoff-p.cfg.backoffMin+1)
			if !p.sleep(d) {
				return
			}
			backoff = min(backoff*2, p.cfg.backoffMax)
			continue
		}
		backoff = p.cfg.backoffMin
		if connected {
			p.stats.reconnects.Add(1)
		}
		connected = true
		var hb sync.WaitGroup
		hb.Go(s.heartbeat)
		p.writeLoop(s, refill(bufs))
		s.fail(ErrClosed) // stops the heartbeat if the pump stopped first
		hb.Wait()
		s.conn.Close()
		p.setSession(nil)
		if err := s.reason(); err != nil && !p.stopping() {
			p.report(fmt.Errorf("inflight: connection lost: %w", err))
		}
	}
}

// refill tops the buffer pool up to framesInFlight. Buffers a dead
// connection never released are replaced; if one comes back late it is
// dropped (the channel is full) or reused.
func refill(bufs chan *transport.Buffer) chan *transport.Buffer {
	for len(bufs) < cap(bufs) {
		bufs <- &transport.Buffer{Owner: bufs}
	}
	return bufs
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
// position.
func (p *Producer) connect() (*session, error) {
	s := newSession(p)
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.dialTimeout)
	go func() { // Close must not wait for a slow dial
		select {
		case <-p.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	conn, err := p.dialer.Dial(ctx, s)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("inflight: dial: %w", err)
	}
	s.conn = conn
	p.setSession(s)
	if err := p.handshake(s); err != nil {
		conn.Close()
		p.setSession(nil)
		return nil, err
	}
	return s, nil
}

func (p *Producer) handshake(s *session) error {
	hello, err := wire.AppendHello(nil, wire.Hello{Version: wire.Version, MaxFrameSize: uint32(p.cfg.maxFrameSize), Producer: p.cfg.name, Topic: p.cfg.topic})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrHandshake, err)
	}
	if err := s.conn.WriteFrame(&transport.Buffer{Bytes: hello}); err != nil {
		return fmt.Errorf("%w: %w", ErrHandshake, err)
	}
	t := p.clock.NewTimer(p.cfg.handshakeTimeout)
	defer t.Stop()
	var ok wire.HelloOK
	select {
	case ok = <-s.helloOK:
	case <-s.dead:
		return fmt.Errorf("%w: %w", ErrHandshake, s.reason())
	case <-t.C():
		return fmt.Errorf("%w: no HELLO_OK within %v", ErrHandshake, p.cfg.handshakeTimeout)
	case <-p.stop:
		return ErrClosed
	}

	if !p.baseSet {
		// First connection: nothing was written yet, so whatever the
		// broker stored under this name came before us; continue after it.
		p.seqBase.Store(ok.LastSeq)
		p.baseSet = true
	} else if base := p.seqBase.Load(); ok.LastSeq > base {
		if ok.LastSeq-base > p.maxWritten.Load() {
			return fmt.Errorf("%w: broker's last seq %d, ours at most %d", ErrSequenceConflict, ok.LastSeq, base+p.maxWritten.Load())
		}
		p.resolve(ok.LastSeq)
	}
	s.maxFrame = min(int(ok.MaxFrameSize), p.cfg.maxFrameSize)
	s.inbound.Store(p.preciseNow())
	s.ready.Store(true)
	return nil
}

// writeLoop writes batches from the oldest unresolved position on, until the
// session dies or the producer stops.
func (p *Producer) writeLoop(s *session, bufs chan *transport.Buffer) {
	var bb wire.BatchBuilder
	pos := p.acked.Load()
	for {
		// Positions below head were resolved (failures do not move acked)
		// and may already hold newer messages: never look below head.
		pos = max(pos, p.ring.Head())
		if !p.ring.Published(pos) {
			switch p.ring.WaitPublished(pos, s.dead) {
			case ringbuf.ErrCanceled:
				return
			case ringbuf.ErrClosed:
				// Closed and everything written: wait for the end.
				select {
				case <-s.dead:
				case <-p.stop:
				}
				return
			}
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
			bufs <- buf
			return
		}
		raw := buf.Bytes // without compression, build the frame in place
		if p.comp != nil {
			raw = p.scratch
		}
		var n int
		pos, n = p.fillBatch(&bb, raw, pos, s.maxFrame)
		if n == 0 {
			bufs <- buf
			continue
		}
		rawLen := bb.Size()
		p.finishBatch(&bb, buf)
		if pos > p.maxWritten.Load() {
			p.maxWritten.Store(pos)
		}
		p.stats.sent.Add(uint64(n))
		p.stats.batches.Add(1)
		p.stats.bytesRaw.Add(uint64(rawLen))
		p.stats.bytesWire.Add(uint64(len(buf.Bytes)))
		if err := s.conn.WriteFrame(buf); err != nil {
			s.fail(err)
			return
		}
	}
}

// finishBatch completes the frame built in bb into buf: in place without
// compression; compressed into buf when that pays; otherwise the raw frame
// in the scratch buffer changes places with buf's (no copy).
func (p *Producer) finishBatch(bb *wire.BatchBuilder, buf *transport.Buffer) {
	if p.comp == nil {
		buf.Bytes = bb.Finish()
		return
	}
	// Room for the worst case up front, so that when compression does not
	// pay, the buffer that goes back to scratch keeps its capacity.
	need := wire.BatchHeaderSize + p.comp.Bound(bb.Size())
	if cap(buf.Bytes) < need {
		buf.Bytes = make([]byte, 0, need)
	}
	frame, compressed := bb.FinishCompressed(p.comp, buf.Bytes)
	if compressed {
		buf.Bytes, p.scratch = frame, bb.Bytes()[:0]
		return
	}
	buf.Bytes, p.scratch = frame, buf.Bytes[:0]
}

// linger waits, up to Linger, until a full batch is published from pos. It
// returns false if the session died or the producer is stopping.
func (p *Producer) linger(s *session, pos uint64) bool {
	last := pos + uint64(p.cfg.maxBatchMessages) - 1
	if p.ring.Published(last) {
		return true
	}
	t := p.clock.NewTimer(p.cfg.linger)
	defer t.Stop()
	switch p.ring.WaitPublishedUntil(last, s.dead, t.C()) {
	case ringbuf.ErrCanceled:
		return false
	}
	return !p.stopping()
}

// fillBatch builds one BATCH frame into buf from consecutive positions
// starting at pos, and returns the next position to look at and the number
// of records. It stops at the batch limits, at the first unpublished
// position, and at a gap: a position that is resolved, or that it resolves
// itself because its deadline passed or its context ended (such a message
// is never written). Sequence IDs in one frame are consecutive.
func (p *Producer) fillBatch(bb *wire.BatchBuilder, raw []byte, pos uint64, maxFrame int) (uint64, int) {
	limit := min(p.cfg.maxBatchBytes, maxFrame)
	maxRecord := maxFrame - wire.BatchHeaderSize - wire.RecordOverhead(maxFrame)
	now := p.preciseNow()
	bb.Reset(raw[:0], p.seqBase.Load()+pos+1)
	n := 0
	for n < p.cfg.maxBatchMessages {
		st := p.ring.State(pos)
		if st == ringbuf.Unpublished {
			break
		}
		if st.Final() {
			if n > 0 {
				break
			}
			pos++
			bb.Reset(raw[:0], p.seqBase.Load()+pos+1)
			continue
		}
		slot := p.ring.Slot(pos)
		size := int(slot.Size())
		if n > 0 && bb.Size()+wire.RecordOverhead(size)+size > limit {
			break
		}
		if !p.ring.Transition(pos, st, ringbuf.Writing) {
			continue // resolved meanwhile: look again
		}
		e := &slot.Value
		var fail ringbuf.State
		switch {
		case slot.Deadline() <= now:
			fail = ringbuf.Expired
		case e.ctx != nil && e.ctx.Err() != nil:
			fail = ringbuf.Canceled
		case size > maxRecord:
			fail = ringbuf.Rejected
		}
		if fail != ringbuf.Unpublished {
			p.ring.Transition(pos, ringbuf.Writing, fail)
			p.failed(pos)
			pos++
			if n > 0 {
				break
			}
			bb.Reset(raw[:0], p.seqBase.Load()+pos+1)
			continue
		}
		bb.AddRecord(e.payload, e.msg.Key, e.msg.Headers, e.msg.EventTime)
		p.ring.Transition(pos, ringbuf.Writing, ringbuf.Written)
		n++
		pos++
	}
	return pos, n
}
