package natsjs

import (
	"context"
	"fmt"
	"slices"
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
// A Store is safe for concurrent use. The broker calls Append and LastSeq
// for one (topic, producer) from one goroutine at a time; calls for
// different ones run concurrently. Append blocks until the stream has
// acknowledged every write (one round trip per message, each bounded by
// Config.Timeout); there is no buffering behind the caller.
//
// The store remembers the tail of every (topic, producer) it has served
// (a few hundred bytes each) for the life of the Store.
type Store struct {
	cfg     Config
	nc      *nats.Conn
	ownConn bool // made by Open: Close closes it

	mu    sync.Mutex
	tails map[key]*subjectState

	bufs sync.Pool // *[]byte packed bodies

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
}

// Stats counts a Store's work since New.
type Stats struct {
	Messages  uint64 // stream messages written
	Records   uint64 // records written
	Conflicts uint64 // failed compare-and-sets (another writer, or a lost ack)
	Trimmed   uint64 // records dropped because the stream already held them
}

// New returns a Store writing through nc into cfg.Stream, which must exist
// (EnsureStream makes it) and fit cfg: it captures the prefix, keeps messages
// by limits, allows atomic publish for LayoutPerRecord and direct get for
// ReadDirect (else ErrStreamMismatch). nc must not buffer while
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
	all := cfg.Prefix + ".>"
	switch {
	case !slices.Contains(got.Subjects, all) && !slices.Contains(got.Subjects, ">"):
		return nil, fmt.Errorf("%w: stream %q captures %q, not %q", ErrStreamMismatch, cfg.Stream, got.Subjects, all)
	case got.Retention != jetstream.LimitsPolicy:
		return nil, fmt.Errorf("%w: stream %q has retention %v; the store needs limits retention", ErrStreamMismatch, cfg.Stream, got.Retention)
	case cfg.Layout == LayoutPerRecord && !got.AllowAtomicPublish:
		return nil, fmt.Errorf("%w: stream %q does not allow atomic publish (needed by the per-record layout)", ErrStreamMismatch, cfg.Stream)
	case cfg.Read == ReadDirect && !got.AllowDirect:
		return nil, fmt.Errorf("%w: stream %q does not allow direct get (needed by ReadDirect)", ErrStreamMismatch, cfg.Stream)
	}
	return &Store{cfg: cfg, nc: nc, tails: make(map[key]*subjectState)}, nil
}

// Subject returns the subject of (topic, producer) in this store.
func (s *Store) Subject(topic, producer string) string {
	return Subject(s.cfg.Prefix, topic, producer)
}

// Stats returns the counters; safe at any time.
func (s *Store) Stats() Stats {
	return Stats{Messages: s.messages.Load(), Records: s.records.Load(), Conflicts: s.conflicts.Load(), Trimmed: s.trimmed.Load()}
}

func (s *Store) state(topic, producer string) *subjectState {
	k := key{topic, producer}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.tails[k]
	if st == nil {
		st = &subjectState{subject: s.Subject(topic, producer)}
		s.tails[k] = st
	}
	return st
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

// State implements broker.Store: the Inflight-Last-Seq and Inflight-Epoch
// of the last message on the subject of (topic, producer), read where
// Config.Read says (0 and 0: no message). It fails with ErrEmptyTopic,
// ErrRead or ErrCorruptTail.
func (s *Store) State(topic, producer string) (broker.NameState, error) {
	if topic == "" {
		return broker.NameState{}, ErrEmptyTopic
	}
	t, err := s.read(s.state(topic, producer), s.cfg.Read == ReadDirect)
	return broker.NameState{LastSeq: t.last, Epoch: t.epoch}, err
}

// LastSeq returns State's LastSeq.
func (s *Store) LastSeq(topic, producer string) (uint64, error) {
	st, err := s.State(topic, producer)
	return st.LastSeq, err
}

// Fence implements broker.Store: it writes a fence message (layout.Fence:
// the new epoch, and the subject's last sequence ID) on the subject of
// (topic, producer) with a compare-and-set on its tail, and returns that
// last sequence ID once the stream acknowledged it. When the compare-and-set
// fails (another writer moved the tail) it reads the tail again from the
// stream leader and tries again. It fails with an error wrapping
// broker.ErrFenced, writing nothing, when the tail's epoch is epoch or
// above; else with ErrEmptyTopic, ErrTailMoving, ErrRead, ErrCorruptTail or
// ErrPublish (the fence may then be written or not: the next State tells).
func (s *Store) Fence(topic, producer string, epoch uint64) (uint64, error) {
	if topic == "" {
		return 0, ErrEmptyTopic
	}
	st := s.state(topic, producer)
	t, err := s.known(st)
	if err != nil {
		return 0, err
	}
	for conflicts := 0; ; {
		if t.epoch >= epoch {
			return 0, fmt.Errorf("inflight: natsjs: %s: %w: epoch %d, stored %d", st.subject, broker.ErrFenced, epoch, t.epoch)
		}
		m := &nats.Msg{Subject: st.subject, Header: make(nats.Header, 5)}
		layout.SetFenceHeaders(m.Header, epoch, t.last)
		s.setCAS(m.Header, t.streamSeq)
		if s.beforeWrite != nil {
			s.beforeWrite(st.subject, 0, 0)
		}
		next, err := s.request(m)
		switch {
		case err == nil:
			s.remember(st, tail{streamSeq: next, last: t.last, epoch: epoch}, true)
			s.messages.Add(1)
			return t.last, nil
		case isConflict(err):
			s.conflicts.Add(1)
			if conflicts++; conflicts > s.cfg.MaxConflicts {
				s.remember(st, tail{}, false)
				return 0, fmt.Errorf("%w: %s: %d conflicts in a row: %w", ErrTailMoving, st.subject, conflicts, err)
			}
			if t, err = s.read(st, false); err != nil {
				return 0, err
			}
		default:
			s.remember(st, tail{}, false)
			return 0, fmt.Errorf("%w: %s fence %d: %w", ErrPublish, st.subject, epoch, err)
		}
	}
}

// Append implements broker.Store: it writes recs to the subject of (topic,
// producer), each record once and in order, whoever else writes there:
// every write is a compare-and-set on the subject's tail; when one fails,
// the store re-reads the tail from the stream leader, drops the records the
// stream already holds (sequence ID <= the tail's Inflight-Last-Seq) and
// writes the rest. Every message carries epoch (Inflight-Epoch), and no
// record is dropped or written once the tail's epoch is above it: the tail
// is then a newer incarnation's, and Append fails with an error wrapping
// broker.ErrFenced (records it wrote before stay). recs' sequence IDs must
// be strictly increasing (else ErrBadRecords); they are read only during
// the call.
//
// A nil return means every record is in the stream (written now or
// before). An error means some leading records may be stored and the rest
// not (the next State tells): ErrEmptyTopic, ErrBadRecords,
// ErrRecordTooLarge, ErrTailMoving, ErrRead, ErrCorruptTail, ErrPublish
// wrapping the client's or server's error, or broker.ErrFenced.
func (s *Store) Append(topic, producer string, epoch uint64, recs []broker.Record) error {
	if topic == "" {
		return ErrEmptyTopic
	}
	if len(recs) == 0 {
		return nil
	}
	for i := range recs {
		if recs[i].Seq == 0 || i > 0 && recs[i].Seq <= recs[i-1].Seq {
			return fmt.Errorf("%w: record %d has sequence ID %d", ErrBadRecords, i, recs[i].Seq)
		}
	}
	st := s.state(topic, producer)
	t, err := s.known(st)
	if err != nil {
		return err
	}
	for conflicts := 0; ; {
		if t.epoch > epoch {
			// Checked before anything is dropped: the records the tail
			// holds are another incarnation's, not these.
			return fmt.Errorf("inflight: natsjs: %s: %w: epoch %d, stored %d", st.subject, broker.ErrFenced, epoch, t.epoch)
		}
		// Drop what the stream already holds.
		if n := sort.Search(len(recs), func(i int) bool { return recs[i].Seq > t.last }); n > 0 {
			s.trimmed.Add(uint64(n))
			recs = recs[n:]
		}
		if len(recs) == 0 {
			return nil
		}
		n, next, err := s.write(st.subject, epoch, recs, t.streamSeq)
		switch {
		case err == nil:
			t = tail{streamSeq: next, last: recs[n-1].Seq, epoch: max(t.epoch, epoch)}
			s.remember(st, t, true)
			s.records.Add(uint64(n))
			recs = recs[n:]
			conflicts = 0
		case isConflict(err):
			// Another writer (a gateway that served this producer before,
			// or this store's own write whose ack was lost) moved the tail.
			s.conflicts.Add(1)
			if conflicts++; conflicts > s.cfg.MaxConflicts {
				s.remember(st, tail{}, false)
				return fmt.Errorf("%w: %s: %d conflicts in a row: %w", ErrTailMoving, st.subject, conflicts, err)
			}
			if t, err = s.read(st, false); err != nil {
				return err
			}
		default:
			// A timeout or a lost connection leaves the write's fate
			// unknown: the next Append or LastSeq reads the tail again.
			s.remember(st, tail{}, false)
			if isSizeErr(err) {
				return err
			}
			return fmt.Errorf("%w: %s [%d..%d]: %w", ErrPublish, st.subject, recs[0].Seq, recs[n-1].Seq, err)
		}
	}
}

// write writes a leading part of recs (how many: n) in one message or one
// atomic batch, as a compare-and-set on stream sequence expect, and returns
// the stream sequence of the last message written.
func (s *Store) write(subject string, epoch uint64, recs []broker.Record, expect uint64) (n int, next uint64, err error) {
	maxPayload := int(s.nc.MaxPayload())
	if s.cfg.Layout == LayoutPerRecord {
		return s.writeRecords(subject, epoch, recs, expect, maxPayload)
	}
	n, size := layout.PackedFit(recs, maxPayload-headerReserve, s.cfg.MaxRecords)
	if n == 0 {
		return 1, 0, fmt.Errorf("%w: %s: record %d takes %d bytes packed, max_payload %d", ErrRecordTooLarge, subject,
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
	m := &nats.Msg{Subject: subject, Data: body, Header: make(nats.Header, 6)}
	layout.SetPackedHeaders(m.Header, recs[0].Seq, recs[n-1].Seq)
	layout.SetEpoch(m.Header, epoch)
	s.setCAS(m.Header, expect)
	if s.beforeWrite != nil {
		s.beforeWrite(subject, recs[0].Seq, recs[n-1].Seq)
	}
	next, err = s.request(m) // the client copied body before returning
	*bp = body[:0]
	s.bufs.Put(bp)
	if err == nil {
		s.messages.Add(1)
	}
	return n, next, err
}

func (s *Store) writeRecords(subject string, epoch uint64, recs []broker.Record, expect uint64, maxPayload int) (int, uint64, error) {
	msgs := make([]*nats.Msg, 0, min(len(recs), s.cfg.MaxBatch))
	for i := range cap(msgs) {
		r := &recs[i]
		var err error
		if size := layout.RecordHeadersSize(r) + 200 + len(r.Payload); size > maxPayload {
			err = fmt.Errorf("%w: %s: record %d takes about %d bytes with its headers, max_payload %d",
				ErrRecordTooLarge, subject, r.Seq, size, maxPayload)
		}
		m := &nats.Msg{Subject: subject, Data: r.Payload, Header: make(nats.Header, 9)}
		layout.SetEpoch(m.Header, epoch)
		if err == nil {
			if err = layout.SetRecordHeaders(m.Header, r); err != nil {
				err = fmt.Errorf("inflight: natsjs: %s: record %d: %w", subject, r.Seq, err)
			}
		}
		if err != nil {
			if i == 0 {
				return 1, 0, err
			}
			break // write the records before it; the next write fails
		}
		msgs = append(msgs, m)
	}
	n := len(msgs)
	if s.beforeWrite != nil {
		s.beforeWrite(subject, recs[0].Seq, recs[n-1].Seq)
	}
	next, err := s.publishBatch(msgs, expect)
	if err == nil {
		s.messages.Add(uint64(n))
	}
	return n, next, err
}
