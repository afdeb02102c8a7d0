package natsjs

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
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

	bufs      sync.Pool // *[]byte packed bodies
	framePool sync.Pool // *frames

	// pub is the store's own connection for writing batches; replies
	// routes the server's answers to them.
	pub     *pubConn
	replies *replies
	// useFast: native writes go as fast batches (a stream of one replica
	// allowing batch publish); it turns off for good when the stream
	// refuses one (it was scaled up, or the setting removed).
	useFast atomic.Bool

	messages, records, conflicts, trimmed atomic.Uint64

	// Test hooks, nil in production: beforeWrite runs before every write;
	// afterChunk after each chunk of a fast batch went out (sent: its
	// records so far); directHook rewrites what a direct read returned.
	beforeWrite func(subject string, first, last uint64)
	afterChunk  func(subject string, sent int)
	directHook  func(subject string, t tail) tail
}

type key struct{ topic, producer string }

// subjectState is what the store knows of one (topic, producer).
type subjectState struct {
	subject string
	t       tail
	known   bool // t was read or written by this store and not since doubted
	// wrote (a fence subject): the stream sequence of the last fence this
	// store wrote and whose outcome it knows (0: none, or a write of the
	// name's since ended without an answer). A writer of a fenced name
	// writes only under a fence it wrote itself (see Store.claim).
	wrote uint64
	// under (a records' subject): the stream sequence of the name's fence,
	// one this store wrote, under which t was read from the stream leader
	// or written by this store (0: none). A fast batch is written only
	// when it is the fence the store knows and wrote.
	under uint64
}

// Stats counts a Store's work since New.
type Stats struct {
	Messages  uint64 // stream messages written
	Records   uint64 // records written
	Conflicts uint64 // failed compare-and-sets (another writer, or a lost ack)
	Trimmed   uint64 // records dropped because the stream already held them
}

// New returns a Store writing into cfg.Stream through nc, which must exist
// (EnsureStream makes it) and fit cfg: it captures the prefix's records and
// fences (Prefix.> and _INFLIGHT.Prefix.>), keeps messages by limits, allows
// atomic publish and rollups, and direct get for ReadDirect (else
// ErrStreamMismatch, which says what a stream made before the native layout
// lacks). nc must not buffer while reconnecting (else ErrBufferingConn):
// dial it with Connect.
//
// The Store reads, fences and takes replies through nc, and writes its
// batches through a connection of its own to the server nc is connected
// to, dialed with nc's options (dialer, TLS, credentials) at the first
// write and again after it broke: nc's server must accept one more
// connection of the same user, over nats:// or tls:// (not a websocket).
// The Store does not own nc; Close the Store (its subscription and its
// own connection) after the last Append returned, and close nc after
// that.
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
	if scheme, _, _ := strings.Cut(nc.ConnectedUrl(), "://"); scheme != "" && scheme != "nats" && scheme != "tls" {
		return nil, fmt.Errorf("%w: the store writes through a connection of its own, which speaks nats:// and tls://, not %s://", ErrInvalidConfig, scheme)
	}
	s := &Store{cfg: cfg, nc: nc, tails: make(map[key]*subjectState), fences: make(map[string]*subjectState),
		pub: newPubConn(nc, cfg.Timeout)}
	if s.replies, err = newReplies(nc); err != nil {
		return nil, err
	}
	s.useFast.Store(cfg.Layout == LayoutNative && !cfg.noFast && got.AllowBatchPublish && got.Replicas <= 1)
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

// remember records the tail of st (known false: read it again next time),
// known under no fence.
func (s *Store) remember(st *subjectState, t tail, known bool) {
	s.rememberUnder(st, t, known, 0)
}

// rememberUnder records the tail of st as known under the fence at stream
// sequence fence (see subjectState.under).
func (s *Store) rememberUnder(st *subjectState, t tail, known bool, fence uint64) {
	s.mu.Lock()
	st.t, st.known, st.under = t, known, fence
	s.mu.Unlock()
}

// readUnder reads the tail of st from the stream leader, after f, the
// name's fence as the store knows it, was read or written: the tail is
// known under f (see subjectState.under).
func (s *Store) readUnder(st *subjectState, f tail) (tail, error) {
	t, err := s.read(st, false)
	if err == nil {
		s.rememberUnder(st, t, true, f.streamSeq)
	}
	return t, err
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
// last message on its fence subject (or, in a stream written before native
// records left it out, a record's own Inflight-Epoch, if higher). Both are
// read where Config.Read says; 0 and 0: nothing. It fails with
// ErrEmptyTopic, ErrInvalidName, ErrRead or ErrCorruptTail.
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
	var t tail
	if direct {
		t, err = s.read(st, true)
	} else {
		t, err = s.readUnder(st, f)
	}
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
			s.mu.Lock()
			ft.t, ft.known, ft.wrote = tail{streamSeq: next, epoch: epoch}, true, next
			s.mu.Unlock()
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
// and none once a newer incarnation of the name fenced: every write is
// conditional on the name's fence, at the stream sequence the store knows,
// and an atomic batch (see writeAtomic) also on the subject's tail. A
// writer of a fenced name (epoch above 0) writes only under a fence it
// wrote itself: it claims the fence first (see claim) when the one it
// knows is another's, so that any other writer's next write fails its
// check. On a stream of one replica a write is a fast batch (see
// writeFast), whose records check the fence alone: it is written only
// when the store also knows the subject's tail under that fence (read from
// the stream leader after it, or written by the store since). When a
// condition fails, the store re-reads fence and tail from the stream
// leader; a fence above epoch (or a tail written by a newer epoch) fails
// the Append with an error wrapping broker.ErrFenced (records it wrote
// before stay); else it drops the records the stream already holds
// (sequence ID <= the tail's) and writes the rest. recs' sequence IDs
// must be strictly increasing (else ErrBadRecords); they are read only
// during the call.
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
		if epoch > 0 && !s.claimed(ft, f) { // (a fence of epoch 0 cannot be written again)
			if f, t, err = s.claim(ft, st, epoch, f); err != nil {
				return err
			}
			continue
		}
		fast := s.cfg.Layout == LayoutNative && s.useFast.Load() && epoch > 0
		if fast && !s.knownUnder(st, f) {
			if t, err = s.readUnder(st, f); err != nil {
				return err
			}
			continue
		}
		c.subjectSeq, c.fenceSeq = t.streamSeq, f.streamSeq
		n, stored, next, err := s.write(&c, fast, producer, epoch, recs)
		if err != nil && stored > 0 {
			// A fast batch stored a prefix before a check refused the
			// rest: the re-read below starts after it.
			s.records.Add(uint64(stored))
			conflicts = 0
		}
		switch {
		case err == nil:
			t = tail{streamSeq: next, last: recs[n-1].Seq, epoch: max(t.epoch, epoch)}
			s.rememberUnder(st, t, true, c.fenceSeq)
			s.records.Add(uint64(n))
			recs = recs[n:]
			conflicts = 0
		case fast && s.fastRefused(err):
			// The stream takes no more fast batches with these checks:
			// write this and every later batch as atomic batches.
			if t, err = s.read(st, false); err != nil {
				return err
			}
		case isConflict(err):
			// Another writer (a gateway that served this producer before,
			// one that fenced it or claimed its fence, or this store's
			// own write whose ack was lost) moved the tail or the fence;
			// or another topic of the name has its fence check in flight
			// (a replicated stream takes one at a time).
			s.conflicts.Add(1)
			if conflicts++; conflicts > s.cfg.MaxConflicts {
				s.remember(st, tail{}, false)
				s.remember(ft, tail{}, false)
				return fmt.Errorf("%w: %s: %d conflicts in a row: %w", ErrTailMoving, st.subject, conflicts, err)
			}
			if f, err = s.read(ft, false); err != nil {
				return err
			}
			if t, err = s.readUnder(st, f); err != nil {
				return err
			}
		default:
			// A timeout or a lost connection leaves the write's fate
			// unknown: the next Append or State reads the tail again, and
			// the next write claims the fence first (a batch of this
			// store may still land, checked against the fence it had).
			s.remember(st, tail{}, false)
			s.remember(ft, tail{}, false)
			s.mu.Lock()
			ft.wrote = 0
			s.mu.Unlock()
			if isSizeErr(err) {
				return err
			}
			return fmt.Errorf("%w: %s [%d..%d]: %w", ErrPublish, st.subject, recs[0].Seq, recs[n-1].Seq, withCause(err))
		}
	}
}

// write writes a leading part of recs (how many: n) in one batch
// conditional on c: a fast batch, an atomic batch of native records, or
// a packed message. It returns how many of the n were stored (only a fast
// batch stores a prefix: an atomic batch stores all or none) and the
// stream sequence of the last stored record's message.
func (s *Store) write(c *check, fast bool, producer string, epoch uint64, recs []broker.Record) (n, stored int, next uint64, err error) {
	c.marked = false
	switch {
	case fast:
		if s.beforeWrite != nil {
			s.beforeWrite(c.subject, recs[0].Seq, recs[len(recs)-1].Seq)
		}
		err = s.retryNoResponders(func() error {
			n, stored, next, err = s.writeFast(c, producer, recs)
			return err
		})
		s.messages.Add(uint64(stored))
		return n, stored, next, err
	case s.cfg.Layout == LayoutNative:
		k := min(len(recs), s.cfg.MaxBatch)
		if s.beforeWrite != nil {
			s.beforeWrite(c.subject, recs[0].Seq, recs[k-1].Seq)
		}
		n, next, err = s.writeAtomic(c, k, func(f *frames, i int) ([]byte, string, error) {
			r := &recs[i]
			var err error
			if f.hdr, err = layout.AppendNativeHeaders(f.hdr, producer, r); err != nil {
				return nil, "", fmt.Errorf("inflight: natsjs: %s: record %d: %w", c.subject, r.Seq, err)
			}
			return r.Payload, "record " + strconv.FormatUint(r.Seq, 10), nil
		})
	default:
		n, next, err = s.writePacked(c, epoch, recs)
	}
	if err == nil {
		stored = n
		s.messages.Add(uint64(n))
		if c.marked {
			s.messages.Add(1)
		}
	}
	return n, stored, next, err
}

// writePacked writes a leading part of recs as one packed message.
func (s *Store) writePacked(c *check, epoch uint64, recs []broker.Record) (int, uint64, error) {
	maxPayload := int(s.nc.MaxPayload())
	n, size := layout.PackedFit(recs, maxPayload-headerReserve, s.cfg.MaxRecords)
	if n == 0 {
		return 1, 0, fmt.Errorf("%w: %s: record %d takes %d bytes packed, max_payload %d", ErrRecordTooLarge, c.subject,
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
	defer func() {
		*bp = body[:0]
		s.bufs.Put(bp)
	}()
	if s.beforeWrite != nil {
		s.beforeWrite(c.subject, recs[0].Seq, recs[n-1].Seq)
	}
	_, next, err := s.writeAtomic(c, 1, func(f *frames, _ int) ([]byte, string, error) {
		f.line(layout.HdrLayout, layout.Packed)
		f.lineUint(layout.HdrFirstSeq, recs[0].Seq)
		f.lineUint(layout.HdrLastSeq, recs[n-1].Seq)
		if epoch > 0 {
			f.lineUint(layout.HdrEpoch, epoch)
		}
		return body, fmt.Sprintf("records %d..%d packed", recs[0].Seq, recs[n-1].Seq), nil
	})
	return n, next, err
}

// claimed reports whether f, the name's fence as the store knows it, is
// one this store wrote, with every write of the name since known.
func (s *Store) claimed(ft *subjectState, f tail) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ft.wrote != 0 && ft.wrote == f.streamSeq
}

// knownUnder reports whether the store knows the tail of st under f, the
// name's fence (see subjectState.under).
func (s *Store) knownUnder(st *subjectState, f tail) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return st.known && st.under != 0 && st.under == f.streamSeq
}

// claim writes the name's fence again, with the same epoch, by a
// compare-and-set on f (re-read from the stream leader when it fails),
// before any write of a fenced name, unless it finds one this store wrote
// since (another topic of the name claimed first). Every writer writes
// only under a fence it wrote itself, so that a write checked against that
// fence proves that nobody else wrote the name's subjects since (a fast
// batch's records check nothing else):
//
//   - another store serving the same incarnation (a gateway still
//     finishing a write for a producer that moved to this one) claims in
//     turn before its next write, and the rest of this one's fast batch
//     is refused, as is its next write;
//   - a batch of this store whose outcome it never learned (a timeout, a
//     lost connection) may still be on its way, checked against the fence
//     it had: moving the fence refuses whatever of it did not land yet.
//
// It returns the fence and the records' tail read after it, from the
// stream leader (known under the fence, see subjectState.under). A fence
// above epoch is returned as it is (Append then fails with ErrFenced).
func (s *Store) claim(ft, st *subjectState, epoch uint64, f tail) (tail, tail, error) {
	for conflicts := 0; !s.claimed(ft, f) && f.epoch <= epoch; {
		m := &nats.Msg{Subject: ft.subject, Header: make(nats.Header, 5)}
		layout.SetFenceHeaders(m.Header, epoch, 0)
		s.setCAS(m.Header, "", f.streamSeq)
		next, err := s.request(m)
		if err == nil {
			f = tail{streamSeq: next, epoch: epoch}
			s.mu.Lock()
			ft.t, ft.known, ft.wrote = f, true, next
			s.mu.Unlock()
			s.messages.Add(1)
			break
		}
		if !isConflict(err) {
			s.remember(ft, tail{}, false)
			return f, tail{}, fmt.Errorf("%w: %s fence %d again: %w", ErrPublish, ft.subject, epoch, withCause(err))
		}
		s.conflicts.Add(1)
		if conflicts++; conflicts > s.cfg.MaxConflicts {
			s.remember(ft, tail{}, false)
			return f, tail{}, fmt.Errorf("%w: %s: %d conflicts in a row: %w", ErrTailMoving, ft.subject, conflicts, err)
		}
		if f, err = s.read(ft, false); err != nil {
			return f, tail{}, err
		}
	}
	t, err := s.readUnder(st, f)
	return f, t, err
}

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
