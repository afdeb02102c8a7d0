package broker

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/wire"
)

// Peer is the transport's side of a session: where the session's outbound
// frames go (see transport.Peer: Send must be safe for concurrent use).
type Peer = transport.Peer

// Session is the broker's half of one connection. Two goroutines work for
// it:
//
//	the transport's reader      Handle: HELLO, PING, BATCH checked and copied  -> queue
//	the session's appender      queue -> Store.Append (many frames at once) -> RECEIPT
//
// So the Store is never called on a transport's goroutine, a connection
// keeps reading (and answering PINGs) while an Append is in flight, and
// every frame that arrived meanwhile goes into the next Append: one write
// and one fsync for all of them (see appender.go). Handle and Close must be
// called from one goroutine at a time (the connection's reader).
type Session struct {
	b     *Broker
	peer  Peer
	name  string
	topic string
	id    Identity          // set by HELLO
	prod  *producerState    // set by HELLO
	epoch uint64            // set by HELLO (under the name's lock): the incarnation it serves
	out   []byte            // the reader's outbound frames, reused
	check wire.RecordReader // the reader's, to check records' metadata
	keep  func()            // during HandleKeep: the frame's release, until a BATCH takes it

	closed atomic.Bool
	q      queue // the frames handed to the appender (appender.go)
}

// NewSession starts a session whose replies go to peer. Accept is the
// same for a transport that knows the broker only as a
// transport.Acceptor.
func (b *Broker) NewSession(peer Peer) *Session {
	b.sessions.Add(1)
	s := &Session{b: b, peer: peer, out: make([]byte, 0, 64)}
	s.q.init()
	return s
}

// Accept implements transport.Acceptor: it returns NewSession(peer).
func (b *Broker) Accept(peer transport.Peer) transport.Session { return b.NewSession(peer) }

// Producer returns the producer name announced by HELLO, or "".
func (s *Session) Producer() string { return s.name }

// Topic returns the topic announced by HELLO, or "".
func (s *Session) Topic() string { return s.topic }

// Identity returns who the peer proved to be in an accepted HELLO
// (anonymous before one).
func (s *Session) Identity() Identity { return s.id }

// Handle processes one complete inbound frame (length prefix included),
// valid only during the call. A HELLO is answered before Handle returns (it
// reads the producer's last stored sequence ID from the Store); a PING too,
// but only after an accepted HELLO: before one, a PING or a BATCH is refused
// (ErrProtocol, ERROR code wire.CodeHelloRequired).
// A BATCH is checked (CRC, records, limits), copied and handed to the
// session's appender, which stores it together with whatever else is
// waiting and then sends the RECEIPT; Handle waits only while more than
// MaxQueuedBytes are already waiting.
//
// A non-nil error means the connection must be closed: ErrProtocol,
// ErrStore, ErrUnauthorized, ErrFenced, ErrNameInUse or ErrReplaced (see
// each), or the Peer's Send error. For all but ErrReplaced the session has
// already sent an ERROR frame saying why. A store failure is found by the
// appender: it sends the ERROR frame, closes the Peer, and Handle returns
// the failure from then on.
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
		if s.prod == nil {
			// Only HELLO opens a session: a PING must not keep an
			// unauthenticated connection alive.
			return s.fail(fmt.Errorf("%w: %w: PING before HELLO", ErrProtocol, errHelloRequired))
		}
		p, err := wire.DecodePing(frame)
		if err != nil {
			return s.fail(fmt.Errorf("%w: %w", ErrProtocol, err))
		}
		if err := s.q.failure(); err != nil {
			return err
		}
		return s.send(wire.AppendPong(s.out[:0], wire.Pong{Nonce: p.Nonce}))
	default:
		return s.fail(fmt.Errorf("%w: a producer may not send %v", ErrProtocol, typ))
	}
}

// HandleKeep implements transport.Keeper: it is Handle for a frame whose
// memory the caller gives to the session, which calls release exactly once,
// from any goroutine, when it no longer needs it: an uncompressed BATCH to
// store is queued as it is, without the copy Handle makes, and released
// after its Append (or when the session drops it); any other frame is
// released before HandleKeep returns. Not concurrent with Handle.
func (s *Session) HandleKeep(frame []byte, release func()) error {
	s.keep = release
	err := s.Handle(frame)
	if s.keep != nil { // not taken by a BATCH
		s.keep = nil
		release()
	}
	return err
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
		ps       *producerState
		old      *Session
		oldEpoch uint64
		holder   Identity
		last     uint64
	)
	key := stream{h.Topic, h.Producer}
	// The name's lock is held by an Append of another session of this name
	// in flight: this waits for it, so that last counts what it stores.
	err = s.b.withProducer(key, func(p *producerState) error {
		ps = p
		if p.owner != nil && p.ownerID.Name != id.Name {
			holder = p.ownerID
			return errNameHeld
		}
		if err := s.b.admit(key, p, &h); err != nil {
			return err
		}
		old, last, s.epoch = p.owner, p.last, p.epoch
		if old != nil {
			oldEpoch = old.epoch
		} else if pin, ok := s.b.store.(Pinner); ok {
			pin.Pin(key.producer) // unpinned by release
		}
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
		return s.fail(err)        // ErrFenced, ErrNameInUse or ErrStore
	}
	s.prod, s.name, s.topic, s.id = ps, h.Producer, h.Topic, id
	s.q.queued = last
	if old != nil {
		s.takeOver(old, oldEpoch)
	}
	maxFrame := min(uint32(s.b.maxFrame), h.MaxFrameSize)
	return s.send(wire.AppendHelloOK(s.out[:0], wire.HelloOK{LastSeq: last, MaxFrameSize: maxFrame, Epoch: s.epoch}))
}

// batch checks a BATCH, copies its records block (decompressed) into a
// buffer of the broker's pool and queues it for the appender.
func (s *Session) batch(frame []byte) error {
	if s.prod == nil {
		return s.fail(fmt.Errorf("%w: %w: BATCH before HELLO", ErrProtocol, errHelloRequired))
	}
	if err := s.q.failure(); err != nil {
		return err
	}
	b, err := wire.DecodeBatch(frame)
	if err != nil {
		return s.fail(fmt.Errorf("%w: %w", ErrProtocol, err))
	}
	last := b.LastSeq()
	if last <= s.q.queued {
		// Every record is stored or queued already (a resend): its
		// receipt follows the Append of what is queued, or comes now.
		if err := s.b.budget.acquire(frameIndex, budgetWait); err != nil {
			return s.fail(err)
		}
		return s.q.push(s, queuedFrame{batch: wire.Batch{Count: b.Count}, last: last, charge: frameIndex})
	}
	// The broker's frame memory is charged before a byte is copied or
	// decoded (see budget.go): a decompression bomb costs its share of it.
	charge, err := s.b.reserve(&b)
	if err != nil {
		return s.fail(err)
	}
	f := queuedFrame{last: last, charge: charge}
	switch {
	case b.Codec == wire.CodecNone && s.keep != nil:
		// The frame is ours until we release it (HandleKeep): b.Data, a
		// view into it, is queued as it is.
		f.keep, s.keep = s.keep, nil
	case b.Codec == wire.CodecNone:
		f.buf = s.b.bufs.get(int(b.RawLen))
		*f.buf = append((*f.buf)[:0], b.Data...)
		b.Data = *f.buf
	default:
		f.buf = s.b.bufs.get(int(b.RawLen))
		if b, _, err = b.Decompress(s.b.dec, (*f.buf)[:0]); err != nil {
			// Decoded within the frame limit, into the buffer charged for it.
			f.drop(s.b)
			return s.fail(fmt.Errorf("%w: %w", ErrProtocol, err))
		}
	}
	headers, err := checkRecords(&b, &s.check)
	if err != nil {
		f.drop(s.b)
		return s.fail(fmt.Errorf("%w: %w", ErrProtocol, err))
	}
	f.charge = s.b.refund(charge, &b, headers)
	f.batch = b
	if b.FirstSeq <= s.q.queued {
		f.skip = int(s.q.queued - b.FirstSeq + 1)
	}
	return s.q.push(s, f)
}

// checkRecords reads every record of a CodecNone batch with rr, so that a
// malformed one fails the session before anything of the batch is queued.
// It returns the number of headers.
func checkRecords(b *wire.Batch, rr *wire.RecordReader) (int, error) {
	it, err := b.Records()
	if err != nil {
		return 0, err
	}
	headers := 0
	for raw, ok := it.Next(); ok; raw, ok = it.Next() {
		if _, plain := wire.PlainPayload(raw); plain {
			continue
		}
		rr.Reset()
		r, err := rr.Read(raw)
		if err != nil {
			return 0, err
		}
		headers += len(r.Headers)
	}
	return headers, it.Err()
}

// send sends a frame built in s.out; the reader's goroutine only.
func (s *Session) send(frame []byte) error {
	s.out = frame[:0]
	return s.peer.Send(frame)
}

// fail reports err to the producer in an ERROR frame, counts it and
// returns it (the reader's goroutine).
func (s *Session) fail(err error) error {
	s.b.count(err)
	_ = s.send(wire.AppendError(s.out[:0], wire.Error{Code: codeOf(err), Text: err.Error()}))
	return err
}

// count counts a session's failure in Stats.
func (b *Broker) count(err error) {
	switch {
	case errors.Is(err, ErrFenced):
		b.fenced.Add(1)
	case errors.Is(err, ErrNameInUse):
		b.nameInUse.Add(1)
	default:
		b.protocolErrors.Add(1)
	}
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
	case errors.Is(err, ErrFenced):
		return wire.CodeFenced
	case errors.Is(err, ErrNameInUse):
		return wire.CodeNameInUse
	case errors.Is(err, ErrStoreFailed), errors.Is(err, ErrStoreClosed):
		return wire.CodeStoreUnavailable
	case errors.Is(err, ErrStore):
		return wire.CodeStore
	case errors.Is(err, ErrUnauthorized):
		return wire.CodeUnauthorized
	case errors.Is(err, errHelloRequired):
		return wire.CodeHelloRequired
	case errors.Is(err, ErrBusy):
		return wire.CodeInternal
	}
	return wire.CodeOf(err)
}

// Close ends the session: the appender stores what is queued (a producer
// that reconnects learns from HELLO_OK what was stored), then stops, and
// the session releases its producer name if it still holds it. Close
// returns when the appender has stopped: after the Append in flight, if
// any, returned. Idempotent; not concurrent with Handle.
func (s *Session) Close() {
	if s.closed.Swap(true) {
		return
	}
	s.q.stop()
	s.b.sessions.Add(-1)
	if s.prod != nil {
		s.b.release(stream{s.topic, s.name}, s.prod, s)
	}
}
