package broker

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/wire"
)

// Peer is the transport's side of a session: where the session's outbound
// frames go (see transport.Peer: Send must be safe for concurrent use).
type Peer = transport.Peer

// Session is the broker's half of one connection. The transport's reader
// calls Handle for every inbound frame; the Store is called only from
// goroutines the session owns, each started when it has work and gone when
// it has none:
//
//	reader (Handle)        HELLO: decode, authenticate      -> HELLO goroutine: Fence, HELLO_OK
//	                       TOPIC: decode, authorize, table  -> topic goroutine: State, TOPIC_OK
//	                       BATCH: check, copy, queue        -> topic goroutine: Append, receipt
//	                       PING:  PONG
//	topic goroutine        one per topic with work queued: takes every frame of its topic
//	                       that waits, one Append for all of them, then its receipt
//	receipts               whichever topic goroutine is done first sends one RECEIPT frame
//	                       for every topic whose receipt is ready (receipts.go)
//
// So a connection keeps reading (and answering PINGs) while its Store calls
// are in flight, topics of one connection never wait for each other's
// Appends, an idle topic costs no goroutine, and Appends of many topics and
// connections run concurrently, which is how a Store commits them together.
// Handle and Close must be called from one goroutine at a time (the
// connection's reader).
type Session struct {
	b    *Broker
	peer Peer

	// The reader's (Handle and Close):
	name      string            // set by HELLO
	id        Identity          // set by HELLO
	helloSeen bool              // a HELLO was accepted for admission
	maxFrame  uint32            // for HELLO_OK
	topics    map[uint32]*topic // declared ids, ended ones until swept
	byName    map[string]*topic // the live entries of topics, by name
	out       []byte            // the reader's outbound frames, reused
	check     wire.RecordReader // the reader's, to check records' metadata
	keep      func()            // during HandleKeep: the frame's release, until a BATCH takes it

	// Set by the HELLO goroutine before it closes helloDone; read by
	// others after it:
	helloDone chan struct{}
	prod      *nameState // nil if the HELLO was refused
	epoch     uint64     // the incarnation the session serves

	closed atomic.Bool
	wg     sync.WaitGroup // the HELLO and topic goroutines; Add on the reader only
	// The reader's last frame's topic id plus one (0: none yet), and when
	// a frame of another topic than the one before it came (ns since the
	// broker started; 0: never): see mixed.
	lastTopic uint32
	switched  atomic.Int64

	// mu guards failed, the queued bytes and every topic's queue.
	mu      sync.Mutex
	failed  error         // the session's failure: every later Handle returns it
	queued  int64         // charges of the frames waiting in the topics' queues
	room    chan struct{} // capacity 1: a topic took frames, or the session failed
	closing bool          // Close: declarations still waiting answer nothing

	acks receipts // receipts.go
}

// NewSession starts a session whose replies go to peer. Accept is the
// same for a transport that knows the broker only as a
// transport.Acceptor.
func (b *Broker) NewSession(peer Peer) *Session {
	b.sessions.Add(1)
	return &Session{b: b, peer: peer, out: make([]byte, 0, 64),
		topics: make(map[uint32]*topic), byName: make(map[string]*topic),
		helloDone: make(chan struct{}), room: make(chan struct{}, 1)}
}

// Accept implements transport.Acceptor: it returns NewSession(peer).
func (b *Broker) Accept(peer transport.Peer) transport.Session { return b.NewSession(peer) }

// Producer returns the producer name announced by HELLO, or "". Reader's
// goroutine only.
func (s *Session) Producer() string { return s.name }

// Topics returns the number of topics declared on the session and not
// ended (TOPIC_OK sent or on its way). Reader's goroutine only.
func (s *Session) Topics() int { return len(s.byName) }

// Identity returns who the peer proved to be in a HELLO (anonymous before
// one). Reader's goroutine only.
func (s *Session) Identity() Identity { return s.id }

// Handle processes one complete inbound frame (length prefix included),
// valid only during the call. Before a HELLO, every other frame is refused
// (ErrProtocol, ERROR code wire.CodeHelloRequired). A HELLO is checked and
// authenticated at once, then admitted (fenced, see fence.go) on a
// goroutine of the session, which sends HELLO_OK. A TOPIC is checked and
// authorized at once, then opened (Store.State) on a goroutine of the
// session, which sends TOPIC_OK or TOPIC_ERROR; the producer may send it
// right after its HELLO, before HELLO_OK. A PING is answered at once. A
// BATCH, for a topic whose TOPIC_OK was sent, is checked (CRC, records,
// limits), copied and queued for its topic, which stores it together with
// whatever else of the topic is waiting and then sends the receipt; Handle
// waits only while more than MaxQueuedBytes are already waiting.
//
// A non-nil error means the connection must be closed: ErrProtocol,
// ErrStore, ErrUnauthorized, ErrFenced, ErrNameInUse or ErrReplaced (see
// each), or the Peer's Send error. For all but ErrReplaced the session has
// already sent an ERROR frame saying why. A failure found on one of the
// session's goroutines (a refused HELLO, a takeover, a store failed for
// good) sends its ERROR frame and closes the Peer there; Handle returns it
// from then on. A store error of one topic ends only that topic (a
// TOPIC_ERROR frame), not the session.
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
	if (typ == wire.TypeTopic || typ == wire.TypeBatch || typ == wire.TypePing) && !s.helloSeen {
		// Only HELLO opens a session: nothing else may keep an
		// unauthenticated connection alive.
		return s.fail(fmt.Errorf("%w: %w: %v before HELLO", ErrProtocol, errHelloRequired, typ))
	}
	if err := s.failure(); err != nil {
		return err
	}
	switch typ {
	case wire.TypeHello:
		return s.hello(frame)
	case wire.TypeTopic:
		return s.declare(frame)
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

// hello checks and authenticates a HELLO on the reader, and starts its
// admission (admitHello) on a goroutine of the session.
func (s *Session) hello(frame []byte) error {
	if s.helloSeen {
		return s.fail(fmt.Errorf("%w: second HELLO", ErrProtocol))
	}
	h, err := wire.DecodeHello(frame)
	if errors.Is(err, wire.ErrVersion) {
		return s.fail(fmt.Errorf("%w: %w (protocol version %d speaks many topics per connection: upgrade the producer)", ErrProtocol, err, wire.Version))
	}
	if err != nil {
		return s.fail(fmt.Errorf("%w: %w", ErrProtocol, err))
	}
	if int(h.MaxFrameSize) < wire.MinMaxFrameSize {
		return s.fail(fmt.Errorf("%w: %w: HELLO max frame size %d below %d", ErrProtocol, wire.ErrMalformed, h.MaxFrameSize, wire.MinMaxFrameSize))
	}
	id, err := s.b.identify(s.peer, &h)
	if err != nil {
		return s.refuse(err, id, "", h.Producer, nil)
	}
	s.helloSeen, s.name, s.id = true, h.Producer, id
	s.maxFrame = min(uint32(s.b.maxFrame), h.MaxFrameSize)
	s.wg.Add(1)
	go s.admitHello(h)
	return nil
}

// admitHello admits the HELLO h (see fence.go), on its own goroutine: it
// may wait for the Store's Fence and for other HELLOs of the name. It sends
// HELLO_OK, or an ERROR and closes the peer.
func (s *Session) admitHello(h wire.Hello) {
	defer s.wg.Done()
	defer close(s.helloDone)
	var (
		ps       *nameState
		old      *Session
		oldEpoch uint64
		holder   Identity
		epoch    uint64
	)
	err := s.b.withName(h.Producer, func(p *nameState) error {
		ps = p
		if owner := p.owner.Load(); owner != nil && p.ownerID.Name != s.id.Name {
			holder = p.ownerID
			return errNameHeld
		}
		if err := s.b.admit(h.Producer, p, &h); err != nil {
			return err
		}
		old, epoch = p.owner.Load(), p.epoch
		if old != nil {
			oldEpoch = old.epoch // its pin passes to s
		} else if pin, ok := s.b.store.(Pinner); ok {
			pin.Pin(h.Producer) // unpinned by release, once s lets the name go
		}
		p.ownerID, p.instance = s.id, h.Instance
		s.epoch = epoch
		p.owner.Store(s)
		return nil
	})
	if errors.Is(err, errNameHeld) {
		// The holder is live and someone else: refuse rather than let
		// anyone who can connect take a running producer's name.
		s.b.release(h.Producer, ps, nil) // forget the state made for this HELLO, if nobody holds it
		err = fmt.Errorf("%w: producer %q is held by a live session of another identity", ErrUnauthorized, h.Producer)
		_ = s.refuse(err, s.id, "", h.Producer, &holder)
		s.abort(err)
		_ = s.peer.Close()
		return
	}
	if err != nil {
		s.b.release(h.Producer, ps, nil)
		s.failAsync(err) // ErrFenced, ErrNameInUse or ErrStore
		return
	}
	s.prod = ps
	if old != nil {
		s.takeOver(old, oldEpoch)
	}
	if err := s.peer.Send(wire.AppendHelloOK(nil, wire.HelloOK{MaxFrameSize: s.maxFrame, Epoch: epoch})); err != nil {
		s.abort(err)
		_ = s.peer.Close()
	}
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
	_ = s.send(wire.AppendError(s.out[:0], wire.Error{Code: codeOf(err), Text: wire.Reason(err)}))
	return err
}

// failAsync fails the session from one of its goroutines: it counts err,
// sends an ERROR frame saying why and closes the peer; the reader's next
// Handle returns err.
func (s *Session) failAsync(err error) {
	if !s.abort(err) {
		return // failed before: that failure spoke
	}
	s.b.count(err)
	_ = s.peer.Send(wire.AppendError(nil, wire.Error{Code: codeOf(err), Text: wire.Reason(err)}))
	_ = s.peer.Close()
}

// abort makes err the session's failure, unless it failed before (it
// reports whether err is the failure): every later Handle returns it, the
// topics drop what they have queued and store nothing more, and a Handle
// waiting for room returns. It sends nothing. Any goroutine.
func (s *Session) abort(err error) bool {
	s.mu.Lock()
	first := s.failed == nil
	if first {
		s.failed = err
	}
	s.mu.Unlock()
	signal(s.room)
	return first
}

// failure returns the session's failure, or nil.
func (s *Session) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
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

// refuse answers a HELLO or TOPIC refused for its identity (err wraps
// ErrUnauthorized): it counts it and tells OnRefused. For a HELLO (topic
// "") it sends an ERROR frame and returns err; for a TOPIC the caller
// sends the TOPIC_ERROR. holder is the identity holding the name, for a
// takeover.
func (s *Session) refuse(err error, id Identity, topic, producer string, holder *Identity) error {
	if holder != nil {
		s.b.refusedTakes.Add(1)
	} else {
		s.b.unauthorized.Add(1)
	}
	if fn := s.b.cfg.onRefused; fn != nil {
		fn(Refusal{Identity: id, Topic: topic, Producer: producer, Holder: holder, Err: err})
	}
	if topic == "" {
		_ = s.peer.Send(wire.AppendError(nil, wire.Error{Code: wire.CodeUnauthorized, Text: wire.Reason(err)}))
	}
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

// Close ends the session: every topic stores what it has queued (a
// producer that reconnects learns from TOPIC_OK what was stored), then
// the session's goroutines stop, and the session releases its producer
// name if it still holds it. Close returns when they have stopped: after
// the Store calls in flight, if any, returned. Idempotent; not concurrent
// with Handle.
func (s *Session) Close() {
	if s.closed.Swap(true) {
		return
	}
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.wg.Wait()
	for _, t := range s.topics {
		s.end(t)
	}
	s.b.sessions.Add(-1)
	if s.prod != nil { // the HELLO goroutine is done: wg
		s.b.release(s.name, s.prod, s)
	}
}
