package core

import (
	"fmt"
	"github.com/inflightmq/inflight/clock"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/wire"
)

// session is the producer's side of one connection: the transport.Handler
// for its inbound frames. The pump owns conn; the handler only signals.
type session struct {
	p        *Producer
	conn     transport.Conn // set and used by the pump only
	helloOK  chan wire.HelloOK
	ready    atomic.Bool  // HELLO_OK processed: receipts may be resolved
	maxFrame int          // negotiated; pump only
	epoch    uint64       // the producer's, from HELLO_OK; pump only
	inbound  atomic.Int64 // when the last frame arrived (producer ns)

	// The topics declared on this connection: ids by topic (the pump's; a
	// topic keeps its id for the life of the connection, also when its
	// lane is forgotten and made anew), lanes by id (the pump stores, the
	// transport's goroutine reads receipts with it).
	ids      map[string]uint32
	byID     sync.Map      // uint32 -> *lane, while the lane lives
	declared atomic.Uint32 // the highest id in ids, for OnFrame

	// The connection's window (the pump's): frames in flight of the lanes
	// whose own window is not full, at most window (see connWindow), so
	// that many topics share it, while a topic whose frames the broker
	// holds (a full window of its own) takes none of it. Lanes waiting for
	// room in it are in roomWait, and take it in the order they came (see
	// serve).
	flying   int
	window   int
	reserved int // places kept for lanes taken from roomWait, until their serve
	roomWait []*lane

	// The frames of the pump's pass, for a transport that writes several
	// at once (vec; nil: each is written as it is made): out.
	vec transport.FramesWriter
	out []*transport.Buffer
	// Payloads written from the Messages' memory (see ZeroCopyMin):
	// splice is the connection when it takes frames with splices and the
	// producer makes them (nil: payloads are copied). Set before the
	// session is; then read by the dispatcher and Send too
	// (detachPayloads). The pump holds pass from the first run of a pass
	// that refers to a payload until the pass ended (endPass), and
	// spliced counts such passes, each before its pass lets go of pass.
	// serial tells sessions apart for detachMemo.
	splice  transport.Splicer
	pass    passLock
	spliced atomic.Uint64
	serial  uint64
	// Lanes that waited for room on this connection (lane.waiting), each
	// once: leave clears their hold when the connection ends. A lane
	// forgotten meanwhile leaves the list (see retire), at the latest
	// once such lanes are half of it.
	parked     []*lane
	parkedGone int // forgotten lanes still in parked

	parkTimer clock.Timer // the pump's, for parkPump

	// The broker's answers to TOPIC, for the pump.
	answersMu sync.Mutex
	answers   []topicAnswer
	receipts  []wire.Receipt // OnFrame's, reused

	once sync.Once
	dead chan struct{} // closed by fail
	err  error         // why; written before dead is closed
}

func newSession(p *Producer) *session {
	return &session{p: p, helloOK: make(chan wire.HelloOK, 1), dead: make(chan struct{}), ids: make(map[string]uint32)}
}

// topicAnswer is a TOPIC_OK (err nil) or a TOPIC_ERROR.
type topicAnswer struct {
	typ     wire.Type
	id      uint32
	lastSeq uint64
	err     *brokerError
}

// answer queues a for the pump and wakes it.
func (s *session) answer(a topicAnswer) {
	s.answersMu.Lock()
	s.answers = append(s.answers, a)
	s.answersMu.Unlock()
	s.p.wakePump()
}

// takeAnswers appends the queued answers to dst and empties the queue.
func (s *session) takeAnswers(dst []topicAnswer) []topicAnswer {
	s.answersMu.Lock()
	dst = append(dst, s.answers...)
	s.answers = s.answers[:0]
	s.answersMu.Unlock()
	return dst
}

func (s *session) hasAnswers() bool {
	s.answersMu.Lock()
	defer s.answersMu.Unlock()
	return len(s.answers) > 0
}

// fail marks the session dead (the first reason wins). Safe from any
// goroutine; the pump closes the connection when it sees it.
func (s *session) fail(err error) {
	if err == nil {
		err = transport.ErrClosed
	}
	s.once.Do(func() {
		s.err = err
		close(s.dead)
	})
}

func (s *session) isDead() bool { return s.reason() != nil }

// reason returns why the session died, or nil while it lives.
func (s *session) reason() error {
	select {
	case <-s.dead:
		return s.err
	default:
		return nil
	}
}

// OnFrame implements transport.Handler. It runs on the transport's
// goroutine and never blocks: receipts are resolved in place.
func (s *session) OnFrame(frame []byte) {
	if s.isDead() {
		return
	}
	s.inbound.Store(s.p.now())
	typ, err := wire.TypeOf(frame)
	if err != nil {
		s.fail(wrap(ErrProtocol, err))
		return
	}
	switch typ {
	case wire.TypeReceipt:
		if !s.ready.Load() {
			s.fail(fmt.Errorf("%w: RECEIPT before HELLO_OK", ErrProtocol))
			return
		}
		rs, err := wire.DecodeReceipts(frame, s.receipts[:0])
		s.receipts = rs
		if err != nil {
			s.fail(wrap(ErrProtocol, fmt.Errorf("bad RECEIPT: %w", err)))
			return
		}
		for _, r := range rs {
			v, ok := s.byID.Load(r.Topic)
			if !ok {
				if r.Topic != 0 && r.Topic <= s.declared.Load() {
					continue // a topic forgotten since (retire): nothing of it is pending
				}
				s.fail(fmt.Errorf("%w: RECEIPT for topic id %d, never declared", ErrProtocol, r.Topic))
				return
			}
			l := v.(*lane)
			l.led.ackThrough(r.Seq)
			s.p.kickRoom(l) // its window may have room now
		}
	case wire.TypeTopicOK:
		t, err := wire.DecodeTopicOK(frame)
		if err != nil {
			s.fail(wrap(ErrProtocol, err))
			return
		}
		s.answer(topicAnswer{typ: typ, id: t.ID, lastSeq: t.LastSeq})
	case wire.TypeTopicError:
		t, err := wire.DecodeTopicError(frame)
		if err != nil {
			s.fail(wrap(ErrProtocol, err))
			return
		}
		s.answer(topicAnswer{typ: typ, id: t.ID, err: newBrokerError(wire.Error{Code: t.Code, Text: t.Text})})
	case wire.TypeHelloOK:
		h, err := wire.DecodeHelloOK(frame)
		if err != nil {
			s.fail(wrap(ErrHandshake, err))
			return
		}
		select {
		case s.helloOK <- h:
		default:
			s.fail(fmt.Errorf("%w: second HELLO_OK", ErrProtocol))
		}
	case wire.TypeError:
		e, err := wire.DecodeError(frame)
		if err != nil {
			s.fail(wrap(ErrProtocol, err))
			return
		}
		s.fail(newBrokerError(e))
	case wire.TypePong:
		// Heartbeat replies need no action: any inbound frame shows the
		// connection is alive.
	default:
		s.fail(fmt.Errorf("%w: unexpected %v frame", ErrProtocol, typ))
	}
}

// OnClose implements transport.Handler.
func (s *session) OnClose(err error) {
	if err == nil {
		err = transport.ErrClosed
	}
	s.fail(err)
}

// hello returns the HELLO frame that opens the session for the
// producer's incarnation epoch (0: a new one).
func (s *session) hello(epoch uint64) ([]byte, error) {
	c := &s.p.cfg
	h := wire.Hello{Version: wire.Version, MaxFrameSize: uint32(c.maxFrameSize), Epoch: epoch,
		Instance: s.p.instance, Yield: c.access != Fencing, Producer: c.name}
	if c.token != nil {
		h.Token = *c.token
	}
	return wire.AppendHello(nil, h)
}

// heartbeat runs beside the pump for the life of a ready session: it PINGs
// the broker after one interval of silence and fails the session after two.
// Any inbound frame counts as a sign of life: a PONG, a RECEIPT. Only the
// producer PINGs; a PING from the broker breaks the protocol (OnFrame). WriteFrame is safe to call
// concurrently with the pump's writes.
func (s *session) heartbeat() {
	p := s.p
	interval := int64(p.cfg.heartbeat)
	t := p.clock.NewTimer(p.cfg.heartbeat / 2)
	defer t.Stop()
	var nonce uint64
	for {
		select {
		case <-t.C():
		case <-s.dead:
			return
		case <-p.stop:
			return
		}
		silent := p.silence(s.inbound.Load(), p.preciseNow())
		switch {
		case silent >= 2*interval:
			s.fail(fmt.Errorf("%w: nothing for %v", ErrHeartbeat, time.Duration(silent)))
			return
		case silent >= interval:
			nonce++
			ping := wire.AppendPing(make([]byte, 0, wire.HeaderSize+8), wire.Ping{Nonce: nonce})
			if err := s.conn.WriteFrame(&transport.Buffer{Bytes: ping}); err != nil {
				s.fail(err)
				return
			}
		}
		t.Reset(p.cfg.heartbeat / 2)
	}
}

// silence returns how long before now the frame stamped (with p.now) at
// stamp arrived, never more than the truth.
func (p *Producer) silence(stamp, now int64) int64 {
	if p.coarse == nil {
		return now - stamp
	}
	arrived, ok := p.coarse.Upper(stamp)
	if !ok {
		return 0
	}
	return now - arrived
}

// framesPerWrite: a connection that takes several frames at once
// (transport.FramesWriter) has a window framesPerWrite times
// MaxFramesInFlight (see connWindow).
const framesPerWrite = 16

// connWindow is how many frames may be in flight on a connection, not
// counting those of lanes whose own window (framesInFlight frames) is
// full: framesInFlight on a transport that takes frames one by one (mem:
// in process a receipt comes back before more frames in flight would help,
// and each frame costs its own hand-over), framesPerWrite times as many on
// one that writes several at once (tcp, stdnet: across a network many
// topics' frames must be in flight to keep the broker busy through a round
// trip, and a pass's frames cost one write together: with 1000 topics on
// tcp, 64 frames carried 1.7 times what 4 did; 16 and 256 less than 64;
// see docs/performance.md). One topic never has more than framesInFlight
// in flight, or more of them closed by a byte bound (see flight).
func connWindow(framesInFlight int, vec bool) int {
	if vec {
		return framesInFlight * framesPerWrite
	}
	return framesInFlight
}

// emit writes buf on s, or adds it to the frames of the pass, which flush
// writes at once.
func (s *session) emit(buf *transport.Buffer) error {
	if s.vec == nil {
		return s.conn.WriteFrame(buf)
	}
	s.out = append(s.out, buf)
	return nil
}

// endPass ends the pump's pass (after its flush, or the session's end): if
// it held pass (a run referred to payloads, see session.splice), the
// pass's frames are the connection's now, or were never handed over (the
// session died first). Nothing to do otherwise. The pump's.
func (s *session) endPass() {
	if s.pass.held {
		s.spliced.Add(1)
		s.pass.release()
	}
}

// passLock is held by the pump while a pass may have frames that refer
// to payloads and that it has not handed to the connection yet: from
// before the first such run is marked written (ledger.nextBatch), when
// its messages may start to resolve, until endPass. detachPayloads locks
// it to wait for the pass. The pump's pass never waits for a goroutine
// that waits for it.
type passLock struct {
	mu   sync.Mutex
	held bool // the pump's
}

// hold takes the lock for the rest of the pass, unless held. The pump's.
func (l *passLock) hold() {
	if !l.held {
		l.mu.Lock()
		l.held = true
	}
}

// release lets it go. The pump's.
func (l *passLock) release() {
	l.held = false
	l.mu.Unlock()
}

// flush writes the frames of the pass.
func (s *session) flush() error {
	if len(s.out) == 0 {
		return nil
	}
	err := s.vec.WriteFrames(s.out)
	clear(s.out)
	s.out = s.out[:0]
	return err
}
