package broker

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/inflightmq/inflight/wire"
)

// topic is one topic a session's producer declared with a TOPIC frame: its
// id on the connection, its queue of checked BATCH frames, and what is
// stored of it. A topic runs a goroutine only while it has work: its
// declaration (Store.State, then TOPIC_OK), then for as long as frames
// wait (see runTopic); so an idle topic costs this struct and its entries
// in the session's tables, no goroutine:
//
//	reader:    TOPIC ........ BATCH f1   BATCH f2 f3 ....................... BATCH f4
//	goroutine: State TOPIC_OK | take [f1] Append RECEIPT | take [f2 f3] Append RECEIPT | exit
//	                                                                          start again: take [f4] ...
//
// Its states: declaring (the reader refuses its BATCHes: the producer
// waits for TOPIC_OK), open, ended (TOPIC_ERROR sent: the reader drops its
// BATCHes, sent before the producer learnt it, unacknowledged; the id may
// be declared again).
type topic struct {
	id    uint32
	name  string
	lock  *streamLock  // the (topic, name) pair's, held (counted) until end
	state atomic.Int32 // topicDeclaring, topicOpen, topicEnded

	// queued is the highest sequence ID queued or known stored: the
	// goroutine sets it before the topic opens, the reader after.
	queued uint64
	// last is the highest sequence ID stored: its goroutine's.
	last uint64

	// Guarded by Session.mu:
	frames   []queuedFrame // waiting for the goroutine, in order
	spare    []queuedFrame // the goroutine's last taken slice, emptied, for the next swap
	bytes    int64         // their charges, counted in Session.queued
	running  bool          // the goroutine is running (or about to)
	released bool          // end ran

	ackAt int // guarded by receipts.mu: 1 + its entry in the pending receipts, or 0
}

const (
	topicDeclaring int32 = iota
	topicOpen
	topicEnded
)

// declare handles a TOPIC frame on the reader: it checks it, asks
// Authorize, makes the topic's entry and starts its goroutine, which opens
// it (openTopic). A refused topic gets a TOPIC_ERROR and the connection
// goes on. An open topic declared again under its id and name (a
// producer that forgot it while it was idle) gets TOPIC_OK with the
// highest sequence ID stored or queued on this connection; any other id or
// name already declared and not ended is a protocol error.
func (s *Session) declare(frame []byte) error {
	d, err := wire.DecodeTopic(frame)
	if err != nil {
		return s.fail(fmt.Errorf("%w: %w", ErrProtocol, err))
	}
	if t := s.topics[d.ID]; t != nil {
		switch st := t.state.Load(); {
		case st == topicOpen && t.name == d.Name:
			// The producer forgot the topic (it was idle) and asks where
			// its sequence IDs go on: the highest stored or queued here,
			// which the reader knows once the topic is open.
			return s.send(wire.AppendTopicOK(s.out[:0], wire.TopicOK{ID: d.ID, LastSeq: t.queued}))
		case st != topicEnded:
			return s.fail(fmt.Errorf("%w: topic id %d declared twice (it is %q)", ErrProtocol, d.ID, t.name))
		}
		s.forget(t)
	}
	if t := s.byName[d.Name]; t != nil {
		if t.state.Load() != topicEnded {
			return s.fail(fmt.Errorf("%w: topic %q declared twice (ids %d and %d)", ErrProtocol, d.Name, t.id, d.ID))
		}
		s.forget(t)
	}
	if len(s.topics) >= s.b.cfg.maxTopics {
		s.sweep()
	}
	if len(s.topics) >= s.b.cfg.maxTopics {
		s.b.topicErrors.Add(1)
		return s.send(wire.AppendTopicError(s.out[:0], wire.TopicError{ID: d.ID, Code: wire.CodeProtocol,
			Text: fmt.Sprintf("topic %q refused: %d topics declared on this connection, the limit (reconnect for a fresh table)", d.Name, len(s.topics))}))
	}
	if err := s.b.authorize(s.id, d.Name, s.name); err != nil {
		_ = s.refuse(err, s.id, d.Name, s.name, nil)
		s.b.topicErrors.Add(1)
		return s.send(wire.AppendTopicError(s.out[:0], wire.TopicError{ID: d.ID, Code: wire.CodeUnauthorized, Text: wire.Reason(err)}))
	}
	t := &topic{id: d.ID, name: d.Name, lock: s.b.lockFor(stream{d.Name, s.name}), running: true}
	s.topics[d.ID], s.byName[d.Name] = t, t
	s.wg.Add(1)
	go s.runTopic(t)
	return nil
}

// forget removes the ended topic t from the reader's tables.
func (s *Session) forget(t *topic) {
	if s.topics[t.id] == t {
		delete(s.topics, t.id)
	}
	if s.byName[t.name] == t {
		delete(s.byName, t.name)
	}
}

// sweep forgets every ended topic (the reader's).
func (s *Session) sweep() {
	for _, t := range s.topics {
		if t.state.Load() == topicEnded {
			s.forget(t)
		}
	}
}

// openTopic runs on t's goroutine: after the HELLO was admitted, it reads
// what the Store holds of (t, the name) and sends TOPIC_OK with its last
// stored sequence ID. It returns false if t did not open: its TOPIC_ERROR
// was sent, or the session failed or is closing.
func (s *Session) openTopic(t *topic) bool {
	<-s.helloDone
	if s.prod == nil {
		return false // the HELLO was refused: the session failed
	}
	s.mu.Lock()
	quit := s.failed != nil || s.closing
	s.mu.Unlock()
	if quit {
		return false
	}
	// The pair's lock: an Append of another session of this name (one the
	// HELLO took the name from) ends before State reads.
	t.lock.mu.Lock()
	st, err := s.b.store.State(t.name, s.name)
	t.lock.mu.Unlock()
	switch {
	case err == nil && st.Epoch > s.epoch:
		// Another broker sharing the Store fenced the name.
		s.failAsync(fmt.Errorf("%w: producer %q: epoch %d, but epoch %d holds the name (topic %q)", ErrFenced, s.name, s.epoch, st.Epoch, t.name))
		return false
	case err != nil:
		s.topicFailed(t, fmt.Errorf("%w: %w", ErrStore, err))
		return false
	}
	// Nothing of t was queued on this connection yet (the reader refuses
	// its BATCHes until TOPIC_OK), and frames of an earlier declaration of
	// the topic, ended by a store error, were dropped: the stored last is
	// the highest sequence ID stored or queued here.
	t.last, t.queued = st.LastSeq, st.LastSeq
	t.state.Store(topicOpen)
	s.b.topics.Add(1)
	if err := s.peer.Send(wire.AppendTopicOK(nil, wire.TopicOK{ID: t.id, LastSeq: st.LastSeq})); err != nil {
		s.abort(err)
		_ = s.peer.Close()
		return false
	}
	return true
}

// topicFailed handles the failure err of t's declaration or Append, on
// t's goroutine: the session is fenced, replaced or failed if err says so
// (the Store fenced the name, or failed for good); any other store error
// ends t alone with a TOPIC_ERROR, dropping its queued frames
// unacknowledged.
func (s *Session) topicFailed(t *topic, err error) {
	switch {
	case errors.Is(err, ErrReplaced):
		s.abort(err) // the taker closes the peer
	case errors.Is(err, ErrFenced), errors.Is(err, ErrStoreFailed), errors.Is(err, ErrStoreClosed), !errors.Is(err, ErrStore):
		s.failAsync(err)
	default:
		s.end(t)
		s.b.topicErrors.Add(1)
		code := wire.CodeStore
		if errors.Is(err, ErrStoreFailed) || errors.Is(err, ErrStoreClosed) {
			code = wire.CodeStoreUnavailable
		}
		if serr := s.peer.Send(wire.AppendTopicError(nil, wire.TopicError{ID: t.id, Code: code, Text: wire.Reason(err)})); serr != nil {
			s.abort(serr)
			_ = s.peer.Close()
		}
	}
}

// dropFrames drops what waits in t's queue; s.mu held.
func (s *Session) dropFrames(t *topic) {
	for i := range t.frames {
		t.frames[i].drop(s.b)
	}
	s.queued -= t.bytes
	t.frames, t.bytes = nil, 0
	signal(s.room)
}

// end marks t ended, drops its queue and gives back its count of the
// pair's lock (nothing of t calls the Store after it). Idempotent; any
// goroutine.
func (s *Session) end(t *topic) {
	if t.state.Swap(topicEnded) == topicOpen {
		s.b.topics.Add(-1)
	}
	s.mu.Lock()
	done := t.released
	t.released = true
	s.dropFrames(t)
	s.mu.Unlock()
	if !done {
		s.b.unlockFor(stream{t.name, s.name}, t.lock)
	}
}

// push queues f for t, starting t's goroutine if it is not running. It
// waits while the session's queues hold over MaxQueuedBytes: until a topic
// takes what waits (after its Append in flight returned) or the session
// fails. It returns the session's failure instead of queueing after one,
// and drops f (unacknowledged) if t ended meanwhile.
func (s *Session) push(t *topic, f queuedFrame) error {
	size := f.charge
	s.mu.Lock()
	for s.failed == nil && s.queued > 0 && s.queued+size > int64(s.b.cfg.maxQueued) {
		s.mu.Unlock()
		<-s.room
		s.mu.Lock()
	}
	if err := s.failed; err != nil {
		s.mu.Unlock()
		f.drop(s.b)
		return err
	}
	if t.state.Load() == topicEnded {
		s.mu.Unlock()
		f.drop(s.b)
		return nil
	}
	t.frames = append(t.frames, f)
	s.noteTopic(t.id)
	t.bytes += size
	s.queued += size
	t.queued = max(t.queued, f.last)
	start := !t.running
	t.running = true
	s.mu.Unlock()
	if start {
		s.wg.Add(1)
		go s.runTopic(t)
	}
	return nil
}

// take swaps the frames waiting for t for spare (emptied). With none
// waiting, or once the session failed or t ended (it drops them), it
// marks t not running and returns nil: the goroutine exits.
func (s *Session) take(t *topic, spare []queuedFrame) []queuedFrame {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil || t.state.Load() == topicEnded {
		s.dropFrames(t)
	}
	if len(t.frames) == 0 {
		t.running = false
		if cap(t.frames) > maxKeptFrames {
			t.frames = nil
		}
		if cap(spare) <= maxKeptFrames {
			t.spare = spare[:0] // kept for the next run: no allocation per frame
		}
		return nil
	}
	if cap(spare) > maxKeptFrames {
		spare = nil // after a burst of small frames: let it go
	}
	taken := t.frames
	t.frames = spare[:0]
	s.queued -= t.bytes
	t.bytes = 0
	signal(s.room)
	return taken
}

// maxKeptFrames bounds the queue slices a topic keeps.
const maxKeptFrames = 64

// runTopic is t's goroutine: it opens t if it is new, then takes
// everything queued for t, stores it with one Append (or several, for more
// records than maxAppendIndex allows) and acknowledges it, until nothing
// waits. A store error ends t or fails the session (topicFailed).
func (s *Session) runTopic(t *topic) {
	defer s.wg.Done()
	if t.state.Load() == topicDeclaring && !s.openTopic(t) {
		// The topic ended or the session failed or is closing: no frame
		// is queued for it again.
		s.mu.Lock()
		t.running = false
		s.mu.Unlock()
		return
	}
	s.mu.Lock()
	taken := t.spare
	t.spare = nil
	s.mu.Unlock()
	var a *appendScratch
	defer func() { s.b.putScratch(a) }()
	for {
		if taken = s.take(t, taken); taken == nil {
			return
		}
		if a == nil {
			a = s.b.getScratch()
		}
		stored, skipped, err := s.appendFrames(t, taken, a)
		if a.large() {
			// Frames of many records: the scratch goes back at once, so
			// that no topic holds a large one between frames.
			s.b.putScratch(a)
			a = nil
		}
		for i := range taken { // after the scratch: no charge left means nothing held
			taken[i].drop(s.b)
		}
		if err == nil {
			// In this order: the records counted, so that a producer
			// that has the receipt sees them in Stats().Stored; the
			// receipt, after the drop, so that it means the frames'
			// memory is given back; the batches, once the receipt was
			// handed to the peer or to the topic sending receipts, so
			// that a caller that sees Stats().Batches move knows the
			// receipt is on its way.
			s.b.stored.Add(uint64(stored))
			s.b.duplicates.Add(uint64(skipped))
			s.ack(t, t.last)
			s.b.batches.Add(uint64(len(taken)))
			continue
		}
		s.topicFailed(t, err)
		// t ended or the session failed: nothing is queued for t again.
		s.mu.Lock()
		s.dropFrames(t)
		t.running = false
		s.mu.Unlock()
		return
	}
}

// mixedWithin is how recent a switch of topics between two frames the
// reader handed on must be for mixed to report several topics in play.
const mixedWithin = time.Millisecond

// noteTopic records that the reader hands on a frame of topic id. The
// reader's.
func (s *Session) noteTopic(id uint32) {
	if s.lastTopic != id+1 {
		if s.lastTopic != 0 {
			s.switched.Store(max(s.b.since(), 1))
		}
		s.lastTopic = id + 1
	}
}

// mixed reports whether the frames the session's reader handed on lately
// were of several topics: a frame of another topic than the one before it
// came within mixedWithin. A connection with one busy topic, whatever
// other topics it declared once, is not mixed.
func (s *Session) mixed() bool {
	at := s.switched.Load()
	return at != 0 && s.b.since()-at < int64(mixedWithin)
}
