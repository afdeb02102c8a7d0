package broker

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/inflightmq/inflight/wire"
)

// Peer is the transport's side of a session: where the session's outbound
// frames go.
type Peer interface {
	// Send queues frame to the producer. frame is valid only during the
	// call. Send is called from the session's goroutine.
	Send(frame []byte) error
	// Close closes the connection. It must be safe from any goroutine and
	// idempotent: a session calls it on another session's peer when it
	// takes over that session's producer name.
	Close() error
}

// Session is the broker's half of one connection. Handle and Close must be
// called from one goroutine at a time (a connection's reader).
type Session struct {
	b      *Broker
	peer   Peer
	name   string
	topic  string
	id     Identity       // set by HELLO
	prod   *producerState // set by HELLO
	closed atomic.Bool
	out    []byte            // reused for outbound frames
	raw    []byte            // reused for decompressed records blocks
	recs   []Record          // reused record views into the current frame
	rr     wire.RecordReader // reused header memory and interned header keys
}

// NewSession starts a session whose replies go to peer.
func (b *Broker) NewSession(peer Peer) *Session {
	b.sessions.Add(1)
	return &Session{b: b, peer: peer, out: make([]byte, 0, 64)}
}

// Producer returns the producer name announced by HELLO, or "".
func (s *Session) Producer() string { return s.name }

// Topic returns the topic announced by HELLO, or "".
func (s *Session) Topic() string { return s.topic }

// Identity returns who the peer proved to be in an accepted HELLO
// (anonymous before one).
func (s *Session) Identity() Identity { return s.id }

// Handle processes one complete inbound frame (length prefix included). A
// non-nil error means the connection must be closed: ErrProtocol, ErrStore,
// ErrUnauthorized or ErrReplaced (see each), or the Peer's Send error. For
// ErrProtocol, ErrStore and ErrUnauthorized the session has already sent an
// ERROR frame saying why.
func (s *Session) Handle(frame []byte) error {
	if s.closed.Load() {
		return ErrSessionClosed
	}
	if len(frame) > s.b.maxFrame {
		return s.fail(fmt.Errorf("%w: %w: %d bytes, limit %d", ErrProtocol, wire.ErrFrameTooLarge, len(frame), s.b.maxFrame))
	}
	typ, err := wire.TypeOf(frame)
	if err != nil {
		return s.fail(fmt.Errorf("%w: %w", ErrProtocol, err))
	}
	switch typ {
	case wire.TypeHello:
		return s.hello(frame)
	case wire.TypeBatch:
		return s.batch(frame)
	case wire.TypePing:
		p, err := wire.DecodePing(frame)
		if err != nil {
			return s.fail(fmt.Errorf("%w: %w", ErrProtocol, err))
		}
		return s.send(wire.AppendPong(s.out[:0], wire.Pong{Nonce: p.Nonce}))
	default:
		return s.fail(fmt.Errorf("%w: a producer may not send %v", ErrProtocol, typ))
	}
}

func (s *Session) hello(frame []byte) error {
	if s.prod != nil {
		return s.fail(fmt.Errorf("%w: second HELLO", ErrProtocol))
	}
	h, err := wire.DecodeHello(frame)
	if err != nil {
		return s.fail(fmt.Errorf("%w: %w", ErrProtocol, err))
	}
	if int(h.MaxFrameSize) < wire.MinMaxFrameSize {
		return s.fail(fmt.Errorf("%w: %w: HELLO max frame size %d below %d", ErrProtocol, wire.ErrMalformed, h.MaxFrameSize, wire.MinMaxFrameSize))
	}
	id, err := s.b.identify(s.peer, &h)
	if err != nil {
		return s.refuse(err, id, &h, nil)
	}
	var (
		ps     *producerState
		old    *Session
		holder Identity
		last   uint64
	)
	key := stream{h.Topic, h.Producer}
	err = s.b.withProducer(key, func(p *producerState) error {
		ps = p
		if p.owner != nil && p.ownerID.Name != id.Name {
			holder = p.ownerID
			return errNameHeld
		}
		if !p.loaded {
			l, err := s.b.store.LastSeq(h.Topic, h.Producer)
			if err != nil {
				return err
			}
			p.last, p.loaded = l, true
		}
		old, last = p.owner, p.last
		p.owner, p.ownerID = s, id
		return nil
	})
	if errors.Is(err, errNameHeld) {
		// The holder is live and someone else: refuse rather than let
		// anyone who can connect take a running producer's name.
		return s.refuse(fmt.Errorf("%w: producer %q of topic %q is held by a live session of another identity", ErrUnauthorized, h.Producer, h.Topic), id, &h, &holder)
	}
	if err != nil {
		s.b.release(key, ps, nil) // forget the state made for this HELLO
		return s.fail(fmt.Errorf("%w: %w", ErrStore, err))
	}
	s.prod, s.name, s.topic, s.id = ps, h.Producer, h.Topic, id
	if old != nil {
		// The producer reconnected before its old connection was noticed
		// dead, or two producers of one identity share a name. The newest
		// wins; the old session's next frame fails with ErrReplaced.
		s.b.takeovers.Add(1)
		old.peer.Close()
	}
	maxFrame := min(uint32(s.b.maxFrame), h.MaxFrameSize)
	return s.send(wire.AppendHelloOK(s.out[:0], wire.HelloOK{LastSeq: last, MaxFrameSize: maxFrame}))
}

func (s *Session) batch(frame []byte) error {
	if s.prod == nil {
		return s.fail(fmt.Errorf("%w: %w: BATCH before HELLO", ErrProtocol, errHelloRequired))
	}
	b, err := wire.DecodeBatch(frame)
	if err != nil {
		return s.fail(fmt.Errorf("%w: %w", ErrProtocol, err))
	}
	// A compressed block is decoded within the frame limit, checked before
	// anything is allocated: a decompression bomb fails this session only.
	if b, s.raw, err = b.Decompress(s.b.dec, s.raw); err != nil {
		return s.fail(fmt.Errorf("%w: %w", ErrProtocol, err))
	}
	recs, err := s.records(&b)
	defer func() { clear(recs); s.recs = recs[:0] }() // drop references to the frame
	if err != nil {
		return s.fail(fmt.Errorf("%w: %w", ErrProtocol, err))
	}

	var skip int
	var ack uint64
	err = s.prod.locked(func(ps *producerState) error {
		if ps.owner != s {
			return ErrReplaced
		}
		first, last := b.FirstSeq, b.LastSeq()
		if first <= ps.last {
			skip = len(recs)
			if last > ps.last {
				skip = int(ps.last - first + 1)
			}
		}
		if skip < len(recs) {
			if err := s.b.store.Append(s.topic, s.name, recs[skip:]); err != nil {
				return fmt.Errorf("%w: %w", ErrStore, err)
			}
			ps.last = last
		}
		ack = ps.last
		return nil
	})
	switch {
	case errors.Is(err, ErrReplaced):
		return err
	case err != nil:
		return s.fail(err)
	}

	s.b.batches.Add(1)
	s.b.stored.Add(uint64(len(recs) - skip))
	if skip > 0 {
		s.b.duplicates.Add(uint64(skip))
	}
	return s.send(wire.AppendReceipt(s.out[:0], wire.Receipt{Seq: ack}))
}

// records reads the records of a CodecNone batch into s.recs, whose
// capacity it reuses: no allocation per record once warm. The caller clears
// what it returns. On error the
// records read so far are returned too, for the caller to clear.
func (s *Session) records(b *wire.Batch) ([]Record, error) {
	recs := s.recs[:0]
	it, err := b.Records()
	if err != nil {
		return recs, err
	}
	s.rr.Reset()
	seq := b.FirstSeq
	for raw, ok := it.Next(); ok; raw, ok = it.Next() {
		// s.recs is all zero between batches (batch clears what it used), so
		// a record without metadata needs only its Seq and Payload written.
		if len(recs) < cap(recs) {
			recs = recs[:len(recs)+1]
		} else {
			recs = append(recs, Record{})
		}
		r := &recs[len(recs)-1]
		r.Seq = seq
		if p, plain := wire.PlainPayload(raw); plain { // no metadata: the common case, kept cheap
			r.Payload = p
		} else {
			w, err := s.rr.Read(raw)
			if err != nil {
				return recs, err
			}
			r.Payload, r.Key, r.Headers, r.EventTime = w.Payload, w.Key, w.Headers, w.EventTime
		}
		seq++
	}
	return recs, it.Err()
}

func (s *Session) send(frame []byte) error {
	s.out = frame[:0]
	return s.peer.Send(frame)
}

// fail reports err to the producer in an ERROR frame and returns it.
func (s *Session) fail(err error) error {
	s.b.protocolErrors.Add(1)
	_ = s.send(wire.AppendError(s.out[:0], wire.Error{Code: codeOf(err), Text: err.Error()}))
	return err
}

// refuse answers a HELLO refused for its identity (err wraps
// ErrUnauthorized): it counts it, tells OnRefused, sends an ERROR frame and
// returns err. holder is the identity holding the name, for a takeover.
func (s *Session) refuse(err error, id Identity, h *wire.Hello, holder *Identity) error {
	if holder != nil {
		s.b.refusedTakes.Add(1)
	} else {
		s.b.unauthorized.Add(1)
	}
	if fn := s.b.cfg.onRefused; fn != nil {
		fn(Refusal{Identity: id, Topic: h.Topic, Producer: h.Producer, Holder: holder, Err: err})
	}
	_ = s.send(wire.AppendError(s.out[:0], wire.Error{Code: wire.CodeUnauthorized, Text: err.Error()}))
	return err
}

// errNameHeld marks a HELLO for a name a live session of another identity
// holds.
var errNameHeld = errors.New("name held by another identity")

// errHelloRequired marks a frame that needs a HELLO first.
var errHelloRequired = errors.New("HELLO required")

func codeOf(err error) wire.ErrorCode {
	switch {
	case errors.Is(err, ErrStoreFailed), errors.Is(err, ErrStoreClosed):
		return wire.CodeStoreUnavailable
	case errors.Is(err, ErrStore):
		return wire.CodeStore
	case errors.Is(err, ErrUnauthorized):
		return wire.CodeUnauthorized
	case errors.Is(err, errHelloRequired):
		return wire.CodeHelloRequired
	}
	return wire.CodeOf(err)
}

// Close ends the session: it releases the producer name if this session
// still holds it. Idempotent; not concurrent with Handle.
func (s *Session) Close() {
	if s.closed.Swap(true) {
		return
	}
	s.b.sessions.Add(-1)
	if s.prod != nil {
		s.b.release(stream{s.topic, s.name}, s.prod, s)
	}
}
