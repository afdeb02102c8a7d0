package natsjs

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/store/natsjs/layout"
)

// headerReserve is what a packed message's headers may take of max_payload.
const headerReserve = 512

// Store keeps inflight records in a JetStream stream: broker.New(store)
// makes a broker whose state lives in the stream, so any number of brokers
// (gateways, or producers' own processes) may serve the same producers.
//
// A Store is safe for concurrent use. The broker calls State and Append
// for one (topic, producer) from one goroutine at a time; calls for
// different ones run concurrently. Append blocks until the stream has
// acknowledged every write (one round trip per atomic batch, each bounded
// by Config.Timeout); there is no buffering behind the caller.
//
// The store remembers the tail of every (topic, producer) and the fence of
// every producer name it has served (a few hundred bytes each) for the life
// of the Store.
type Store struct {
	cfg     Config
	nc      *nats.Conn
	ownConn bool // made by Open: Close closes it

	mu     sync.Mutex
	tails  map[key]*subjectState
	fences map[string]*subjectState // by producer name: its fence subject

	bufs sync.Pool // *[]byte packed bodies

	// fast is set when native writes go as fast batches (a stream of one
	// replica allowing batch publish); useFast turns off for good when
	// the stream refuses one (it was scaled up, or the setting removed).
	fast    *fastBatches
	useFast atomic.Bool

	messages, records, conflicts, trimmed atomic.Uint64

	// Test hooks, nil in production: beforeWrite runs before every write;
	// directHook rewrites what a direct read returned.
	beforeWrite func(subject string, first, last uint64)
	directHook  func(subject string, t tail) tail
}

type key struct{ topic, producer string }

// subjectState is what the store knows of one (topic, producer).
type subjectState struct {
	subject string
	t       tail
	known   bool // t was read or written by this store and not since doubted
	// refence (a fence subject): a fast batch of the name's ended without
	// an answer; write the fence again before the next one (see refence).
	refence bool
}

// Stats counts a Store's work since New.
type Stats struct {
	Messages  uint64 // stream messages written
	Records   uint64 // records written
	Conflicts uint64 // failed compare-and-sets (another writer, or a lost ack)
	Trimmed   uint64 // records dropped because the stream already held them
}

// New returns a Store writing through nc into cfg.Stream, which must exist
// (EnsureStream makes it) and fit cfg: it captures the prefix's records and
// fences (Prefix.> and _INFLIGHT.Prefix.>), keeps messages by limits, allows
// atomic publish and rollups, and direct get for ReadDirect (else
// ErrStreamMismatch, which says what a stream made before the native layout
// lacks). nc must not buffer while
// reconnecting (else ErrBufferingConn): dial it with Connect. The Store
// does not own nc; close nc after the last Append returned.
func New(ctx context.Context, nc *nats.Conn, cfg Config) (*Store, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if nc == nil {
		return nil, fmt.Errorf("%w: nil nats.Conn", ErrInvalidConfig)
	}
	if nc.Opts.ReconnectBufSize != -1 {
		return nil, ErrBufferingConn
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("inflight: natsjs: %w", err)
	}
	st, err := lookupStream(ctx, js, cfg.Stream)
	if err != nil {
		return nil, err
	}
	got := st.CachedInfo().Config
	if err := checkWritable(got, cfg.Stream, cfg.Prefix); err != nil {
		return nil, err
	}
	if cfg.Read == ReadDirect && !got.AllowDirect {
		return nil, fmt.Errorf("%w: stream %q does not allow direct get (needed by ReadDirect)", ErrStreamMismatch, cfg.Stream)
	}
	s := &Store{cfg: cfg, nc: nc, tails: make(map[key]*subjectState), fences: make(map[string]*subjectState)}
	if cfg.Layout == LayoutNative && !cfg.noFast && got.AllowBatchPublish && got.Replicas <= 1 {
		if s.fast, err = newFastBatches(nc); err != nil {
			return nil, err
		}
		s.useFast.Store(true)
	}
	return s, nil
}

// Subject returns the subject of (topic, producer) in this store.
func (s *Store) Subject(topic, producer string) string {
	return Subject(s.cfg.Prefix, topic, producer)
}

// Stats returns the counters; safe at any time.
func (s *Store) Stats() Stats {
	return Stats{Messages: s.messages.Load(), Records: s.records.Load(), Conflicts: s.conflicts.Load(), Trimmed: s.trimmed.Load()}
}

// state returns what the store knows of (topic, producer), after checking
// that they can be subject tokens (once).
func (s *Store) state(topic, producer string) (*subjectState, error) {
	k := key{topic, producer}
	s.mu.Lock()
	st := s.tails[k]
	s.mu.Unlock()
	if st != nil {
		return st, nil
	}
	if topic == "" {
		return nil, ErrEmptyTopic
	}
	if err := CheckTopic(topic); err != nil {
		return nil, err
	}
	if err := CheckProducer(producer); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st = s.tails[k]; st == nil {
		st = &subjectState{subject: s.Subject(topic, producer)}
		s.tails[k] = st
	}
	return st, nil
}

// fence returns what the store knows of producer's fence.
func (s *Store) fence(producer string) (*subjectState, error) {
	s.mu.Lock()
	ft := s.fences[producer]
	s.mu.Unlock()
	if ft != nil {
		return ft, nil
	}
	if err := CheckProducer(producer); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ft = s.fences[producer]; ft == nil {
		ft = &subjectState{subject: FenceSubject(s.cfg.Prefix, producer)}
		s.fences[producer] = ft
	}
	return ft, nil
}

// remember records the tail of st (known false: read it again next time).
func (s *Store) remember(st *subjectState, t tail, known bool) {
	s.mu.Lock()
	st.t, st.known = t, known
	s.mu.Unlock()
}

func (s *Store) read(st *subjectState, direct bool) (tail, error) {
	t, err := s.readTail(st.subject, direct)
	if err == nil && direct && s.directHook != nil {
		t = s.directHook(st.subject, t)
	}
	if err != nil {
		s.remember(st, tail{}, false)
		return tail{}, err
	}
	s.remember(st, t, true)
	return t, nil
}

// known returns the tail of st this store last wrote or read, reading it
// where Config.Read says when there is none.
func (s *Store) known(st *subjectState) (tail, error) {
	s.mu.Lock()
	t, known := st.t, st.known
	s.mu.Unlock()
	if known {
		return t, nil
	}
	return s.read(st, s.cfg.Read == ReadDirect)
}

// State implements broker.Store: LastSeq is the Inflight-Seq (or, in the
// layouts before the native one, Inflight-Last-Seq) of the last message on
// the subject of (topic, producer); Epoch the producer name's, from the
// last message on its fence subject (or a record's own Inflight-Epoch, if
// higher). Both are read where Config.Read says; 0 and 0: nothing. It fails
// with ErrEmptyTopic, ErrInvalidName, ErrRead or ErrCorruptTail.
func (s *Store) State(topic, producer string) (broker.NameState, error) {
	st, err := s.state(topic, producer)
	if err != nil {
		return broker.NameState{}, err
	}
	ft, err := s.fence(producer)
	if err != nil {
		return broker.NameState{}, err
	}
	direct := s.cfg.Read == ReadDirect
	f, err := s.read(ft, direct)
	if err != nil {
		return broker.NameState{}, err
	}
	t, err := s.read(st, direct)
	return broker.NameState{LastSeq: t.last, Epoch: max(t.epoch, f.epoch)}, err
}

// Fence implements broker.Store: it writes a fence message (layout.Fence,
// the new epoch) on the producer name's fence subject (FenceSubject,
// outside the records' subjects) with a compare-and-set on that subject's
// tail, and returns once the stream acknowledged it. Every later Append of
// the name, on every topic, checks that fence in the same atomic batch as
// its records. When the compare-and-set fails (another gateway fenced
// meanwhile) it reads the fence again from the stream leader and tries
// again. It fails with an error wrapping broker.ErrFenced, writing nothing,
// when the stored epoch is epoch or above; else with ErrInvalidName,
// ErrTailMoving, ErrRead, ErrCorruptTail or ErrPublish (the fence may then
// be written or not: the next State tells).
func (s *Store) Fence(producer string, epoch uint64) error {
	ft, err := s.fence(producer)
	if err != nil {
		return err
	}
	f, err := s.known(ft)
	if err != nil {
		return err
	}
	for conflicts := 0; ; {
		if f.epoch >= epoch {
			return fmt.Errorf("inflight: natsjs: producer %q: %w: epoch %d, stored %d", producer, broker.ErrFenced, epoch, f.epoch)
		}
		m := &nats.Msg{Subject: ft.subject, Header: make(nats.Header, 5)}
		layout.SetFenceHeaders(m.Header, epoch, 0)
		s.setCAS(m.Header, "", f.streamSeq)
		if s.beforeWrite != nil {
			s.beforeWrite(ft.subject, 0, 0)
		}
		next, err := s.request(m)
		switch {
		case err == nil:
			s.remember(ft, tail{streamSeq: next, epoch: epoch}, true)
			s.messages.Add(1)
			return nil
		case isConflict(err):
			s.conflicts.Add(1)
			if conflicts++; conflicts > s.cfg.MaxConflicts {
				s.remember(ft, tail{}, false)
				return fmt.Errorf("%w: %s: %d conflicts in a row: %w", ErrTailMoving, ft.subject, conflicts, err)
			}
			if f, err = s.read(ft, false); err != nil {
				return err
			}
		default:
			s.remember(ft, tail{}, false)
			return fmt.Errorf("%w: %s fence %d: %w", ErrPublish, ft.subject, epoch, withCause(err))
		}
	}
}

// Append implements broker.Store: it writes recs to the subject of (topic,
// producer), each record once and in order, whoever else writes there,
// and none once a newer incarnation of the name fenced: every write is an
// atomic batch (see publishBatch) conditional on the subject's tail and on
// the name's fence, at the stream sequences the store knows. When the
// condition fails, the store re-reads both from the stream leader; a fence
// above epoch (or a tail written by a newer epoch) fails the Append with an
// error wrapping broker.ErrFenced (records it wrote before stay); else it
// drops the records the stream already holds (sequence ID <= the tail's)
// and writes the rest. recs' sequence IDs must be strictly increasing
// (else ErrBadRecords); they are read only during the call.
//
// A nil return means every record is in the stream (written now or
// before). An error means some leading records may be stored and the rest
// not (the next State tells): ErrEmptyTopic, ErrInvalidName,
// ErrBadRecords, ErrRecordTooLarge, ErrTailMoving, ErrRead,
// ErrCorruptTail, ErrPublish wrapping the client's or server's error, or
// broker.ErrFenced.
func (s *Store) Append(topic, producer string, epoch uint64, recs []broker.Record) error {
	if len(recs) == 0 {
		if _, err := s.state(topic, producer); err != nil {
			return err
		}
		return nil
	}
	for i := range recs {
		if recs[i].Seq == 0 || i > 0 && recs[i].Seq <= recs[i-1].Seq {
			return fmt.Errorf("%w: record %d has sequence ID %d", ErrBadRecords, i, recs[i].Seq)
		}
	}
	st, err := s.state(topic, producer)
	if err != nil {
		return err
	}
	ft, err := s.fence(producer)
	if err != nil {
		return err
	}
	f, err := s.known(ft)
	if err != nil {
		return err
	}
	t, err := s.known(st)
	if err != nil {
		return err
	}
	if s.useFast.Load() && epoch > 0 {
		s.mu.Lock()
		again := ft.refence
		s.mu.Unlock()
		if again {
			if f, t, err = s.refence(ft, st, epoch); err != nil {
				return err
			}
		}
	}
	c := check{subject: st.subject, fence: ft.subject, mark: markSubject(s.cfg.Prefix, producer), markEpoch: epoch}
	for conflicts := 0; ; {
		if stored := max(f.epoch, t.epoch); stored > epoch {
			// Checked before anything is dropped: the records the tail
			// holds are another incarnation's, not these.
			return fmt.Errorf("inflight: natsjs: %s: %w: epoch %d, stored %d", st.subject, broker.ErrFenced, epoch, stored)
		}
		// Drop what the stream already holds.
		if n := sort.Search(len(recs), func(i int) bool { return recs[i].Seq > t.last }); n > 0 {
			s.trimmed.Add(uint64(n))
			recs = recs[n:]
		}
		if len(recs) == 0 {
			return nil
		}
		c.subjectSeq, c.fenceSeq = t.streamSeq, f.streamSeq
		n, stored, next, err := s.write(&c, producer, epoch, recs)
		if err != nil && stored > 0 {
			// A fast batch stored a prefix before a check refused the
			// rest: the re-read below starts after it.
			s.records.Add(uint64(stored))
			conflicts = 0
		}
		switch {
		case err == nil:
			t = tail{streamSeq: next, last: recs[n-1].Seq, epoch: max(t.epoch, epoch)}
			s.remember(st, t, true)
			s.records.Add(uint64(n))
			recs = recs[n:]
			conflicts = 0
		case s.fastRefused(err):
			// The stream takes no more fast batches with these checks:
			// write this and every later batch as atomic batches.
			if t, err = s.read(st, false); err != nil {
				return err
			}
		case isConflict(err):
			// Another writer (a gateway that served this producer before,
			// one that fenced it, or this store's own write whose ack was
			// lost) moved the tail or the fence; or another topic of the
			// name has its fence check in flight (a replicated stream takes
			// one at a time).
			s.conflicts.Add(1)
			if conflicts++; conflicts > s.cfg.MaxConflicts {
				s.remember(st, tail{}, false)
				s.remember(ft, tail{}, false)
				return fmt.Errorf("%w: %s: %d conflicts in a row: %w", ErrTailMoving, st.subject, conflicts, err)
			}
			if f, err = s.read(ft, false); err != nil {
				return err
			}
			if t, err = s.read(st, false); err != nil {
				return err
			}
		default:
			// A timeout or a lost connection leaves the write's fate
			// unknown: the next Append or State reads the tail again.
			s.remember(st, tail{}, false)
			s.remember(ft, tail{}, false)
			if c.fast {
				s.mu.Lock()
				ft.refence = true
				s.mu.Unlock()
			}
			if isSizeErr(err) {
				return err
			}
			return fmt.Errorf("%w: %s [%d..%d]: %w", ErrPublish, st.subject, recs[0].Seq, recs[n-1].Seq, withCause(err))
		}
	}
}

// write writes a leading part of recs (how many: n) in one batch
// conditional on c, and returns the stream sequence of its last record
// message. On an error, the first stored of the n records may be in the
// stream (a fast batch stores a prefix; an atomic batch, none).
func (s *Store) write(c *check, producer string, epoch uint64, recs []broker.Record) (n, stored int, next uint64, err error) {
	maxPayload := int(s.nc.MaxPayload())
	if s.cfg.Layout == LayoutNative {
		return s.writeNative(c, producer, epoch, recs, maxPayload)
	}
	n, size := layout.PackedFit(recs, maxPayload-headerReserve, s.cfg.MaxRecords)
	if n == 0 {
		return 1, 0, 0, fmt.Errorf("%w: %s: record %d takes %d bytes packed, max_payload %d", ErrRecordTooLarge, c.subject,
			recs[0].Seq, layout.PackedSize(recs[:1]), maxPayload)
	}
	bp, _ := s.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	if cap(*bp) < size {
		*bp = make([]byte, 0, size)
	}
	body := layout.AppendPacked((*bp)[:0], recs[:n])
	m := &nats.Msg{Subject: c.subject, Data: body, Header: make(nats.Header, 10)}
	layout.SetPackedHeaders(m.Header, recs[0].Seq, recs[n-1].Seq)
	layout.SetEpoch(m.Header, epoch)
	if s.beforeWrite != nil {
		s.beforeWrite(c.subject, recs[0].Seq, recs[n-1].Seq)
	}
	next, err = s.publishBatch([]*nats.Msg{m}, c) // the client copied body before returning
	*bp = body[:0]
	s.bufs.Put(bp)
	if err == nil {
		s.messages.Add(2)
	}
	return n, 0, next, err
}

func (s *Store) writeNative(c *check, producer string, epoch uint64, recs []broker.Record, maxPayload int) (int, int, uint64, error) {
	fast := s.useFast.Load() && epoch > 0 // (a fence of epoch 0 cannot be written again)
	c.fast = fast
	limit := s.cfg.MaxBatch
	if fast {
		limit = maxFastBatch
	}
	msgs := make([]*nats.Msg, 0, min(len(recs), limit))
	for i := range cap(msgs) {
		r := &recs[i]
		var err error
		if size := layout.NativeHeadersSize(producer, r) + 200 + len(r.Payload); size > maxPayload {
			err = fmt.Errorf("%w: %s: record %d takes about %d bytes with its headers, max_payload %d",
				ErrRecordTooLarge, c.subject, r.Seq, size, maxPayload)
		}
		m := &nats.Msg{Subject: c.subject, Data: r.Payload, Header: make(nats.Header, 8+len(r.Headers))}
		if err == nil {
			if err = layout.SetNativeHeaders(m.Header, producer, epoch, r); err != nil {
				err = fmt.Errorf("inflight: natsjs: %s: record %d: %w", c.subject, r.Seq, err)
			}
		}
		if err != nil {
			if i == 0 {
				return 1, 0, 0, err
			}
			break // write the records before it; the next write fails
		}
		msgs = append(msgs, m)
	}
	n := len(msgs)
	if s.beforeWrite != nil {
		s.beforeWrite(c.subject, recs[0].Seq, recs[n-1].Seq)
	}
	if fast {
		stored, next, err := s.publishFast(msgs, c)
		s.messages.Add(uint64(stored))
		if c.marked {
			s.messages.Add(1)
		}
		return n, stored, next, err
	}
	next, err := s.publishBatch(msgs, c)
	if err == nil {
		s.messages.Add(uint64(len(msgs)))
		if c.marked {
			s.messages.Add(1)
		}
	}
	return n, 0, next, err
}

// maxFastBatch caps the records of one fast batch: the messages of a batch
// are built before it is sent.
const maxFastBatch = 8192

// fastRefused reports an error of the server that refuses this store's
// fast batches for good (the stream no longer allows batch publish, or it
// was scaled up: a replicated stream takes one check per subject in
// flight, and every message of a fast batch checks the fence), and then
// turns them off.
func (s *Store) fastRefused(err error) bool {
	var ae *apiError
	if !s.useFast.Load() || !errors.As(err, &ae) || ae.ErrCode != codeWrongLastConst && ae.ErrCode != codeBatchDisabled {
		return false
	}
	s.useFast.Store(false)
	return true
}

// refence writes the fence of the name again, with the same epoch, before
// the first fast batch after one whose outcome the store never learned
// (a timeout, a lost connection): that batch's messages may still be on
// their way, and each checks the fence at the stream sequence it had, so
// moving the fence refuses whatever of them did not land yet. It returns
// the fence and the records' tail read after it, from the stream leader.
// A fence above epoch is returned as it is (Append then fails with
// ErrFenced).
func (s *Store) refence(ft, st *subjectState, epoch uint64) (f, t tail, err error) {
	for conflicts := 0; ; conflicts++ {
		if f, err = s.read(ft, false); err != nil {
			return f, t, err
		}
		if f.epoch > epoch {
			break
		}
		m := &nats.Msg{Subject: ft.subject, Header: make(nats.Header, 5)}
		layout.SetFenceHeaders(m.Header, epoch, 0)
		s.setCAS(m.Header, "", f.streamSeq)
		next, err := s.request(m)
		if err == nil {
			f = tail{streamSeq: next, epoch: epoch}
			s.mu.Lock()
			ft.t, ft.known, ft.refence = f, true, false
			s.mu.Unlock()
			s.messages.Add(1)
			break
		}
		if !isConflict(err) {
			return f, t, fmt.Errorf("%w: %s fence %d again: %w", ErrPublish, ft.subject, epoch, withCause(err))
		}
		s.conflicts.Add(1)
		if conflicts >= s.cfg.MaxConflicts {
			return f, t, fmt.Errorf("%w: %s: %d conflicts in a row: %w", ErrTailMoving, ft.subject, conflicts+1, err)
		}
	}
	t, err = s.read(st, false)
	return f, t, err
}
