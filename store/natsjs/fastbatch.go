package natsjs

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/store/natsjs/layout"
)

// Fast batch publish (ADR-50, nats-server 2.14): the messages of a batch
// are stored as they arrive, not staged; the batch's id, its sequence and
// the operation travel in each message's reply subject:
//
//	<inbox>.<batch id>.<flow>.fail.<batch seq>.<op>.$FI      op: 0 start, 1 append, 2 commit, 3 end (no message)
//
// The server answers on that subject: a flow ack {"type":"ack","seq":N}
// every few messages (N and all before it are stored), {"type":"err"} for a
// message it refused, and the PubAck of the commit ({"seq": stream
// sequence of the last stored message, "count": messages stored}). In
// "fail" mode a refused message ends the batch: what is stored is a prefix.
const (
	// fastFlow is the flow ack interval asked of the server (it acks at
	// most every 500 messages, fewer when several batches share the
	// stream).
	fastFlow = 500
	// fastWindow is how many messages of a batch may be on their way
	// unacknowledged: several flow intervals, so that the server always
	// has the next messages queued when an ack is still on its way back.
	fastWindow = 4 * fastFlow
	// firstChunk is how many records go in the first write of a batch,
	// so that the server starts storing while the rest is built;
	// chunkBytes is the size of the writes after it.
	firstChunk = 64
	chunkBytes = 64 << 10

	opStart, opAppend, opCommit, opEnd = 0, 1, 2, 3
)

// errBatchEnded: the server ended a fast batch early without saying why.
var errBatchEnded = errors.New("fast batch ended early")

// batchReply is any reply of the server to a batch: a fast batch's flow
// ack, error or gap (Type set), or a PubAck (Type empty).
type batchReply struct {
	Type   string    `json:"type"` // "ack", "err", "gap"; "" for the PubAck
	Seq    uint64    `json:"seq"`
	Stream string    `json:"stream"`
	Count  int       `json:"count"`
	Error  *apiError `json:"error"`
}

// replies routes the server's replies to the store's batches, fast and
// atomic, to their writers: one subscription on <inbox>.>, a batch's
// replies on <inbox>.<batch id>.... Safe for concurrent use.
type replies struct {
	inbox string
	sub   *nats.Subscription

	mu    sync.Mutex
	waits map[string]*batchWait // by batch id; guarded by mu
}

// batchWait is what a writer learns of its batch. The subscription's
// goroutine sets it and never blocks (wake has room for one signal).
type batchWait struct {
	acked atomic.Uint64 // a fast batch: the highest batch sequence a flow ack confirmed
	wake  chan struct{}

	mu           sync.Mutex
	done         bool       // the PubAck (or a refusal of the whole batch) came
	final        batchReply // guarded by mu, set once done
	err          *apiError  // a fast batch: the first message refused; guarded by mu
	noResponders bool       // the batch's first message (fast) or its commit (atomic) reached no stream
}

func newReplies(nc *nats.Conn) (*replies, error) {
	r := &replies{inbox: nc.NewRespInbox(), waits: make(map[string]*batchWait)}
	sub, err := nc.Subscribe(r.inbox+".>", r.handle)
	if err != nil {
		return nil, fmt.Errorf("inflight: natsjs: batch replies: %w", err)
	}
	// Replies are small and must not be dropped as a slow consumer's.
	_ = sub.SetPendingLimits(-1, -1)
	r.sub = sub
	return r, nil
}

func (r *replies) close() { _ = r.sub.Unsubscribe() }

func (r *replies) register(id string) *batchWait {
	w := &batchWait{wake: make(chan struct{}, 1)}
	r.mu.Lock()
	r.waits[id] = w
	r.mu.Unlock()
	return w
}

func (r *replies) unregister(id string) {
	r.mu.Lock()
	delete(r.waits, id)
	r.mu.Unlock()
}

// firstReply is the end of the reply subject of a fast batch's first
// message (oneReply: a batch of one message, which starts and commits);
// commitReply that of an atomic batch's commit.
const (
	firstReply  = ".1.0.$FI"
	oneReply    = ".1.2.$FI"
	commitReply = ".c"
)

// handle runs on the subscription's goroutine.
func (r *replies) handle(m *nats.Msg) {
	id, _, _ := strings.Cut(strings.TrimPrefix(m.Subject, r.inbox+"."), ".")
	r.mu.Lock()
	w := r.waits[id]
	r.mu.Unlock()
	if w == nil {
		return // a batch already given up, or answers to messages after its end
	}
	if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
		// No stream took the message. Only the first message of a fast
		// batch, or an atomic batch's commit, says nothing was stored.
		if strings.HasSuffix(m.Subject, firstReply) || strings.HasSuffix(m.Subject, oneReply) || strings.HasSuffix(m.Subject, commitReply) {
			w.mu.Lock()
			w.noResponders = true
			w.mu.Unlock()
			w.signal()
		}
		return
	}
	var br batchReply
	if err := json.Unmarshal(m.Data, &br); err != nil {
		br = batchReply{Error: &apiError{Description: fmt.Sprintf("bad batch reply %.100q", m.Data)}}
	}
	switch br.Type {
	case "ack":
		for {
			cur := w.acked.Load()
			if br.Seq <= cur || w.acked.CompareAndSwap(cur, br.Seq) {
				break
			}
		}
	case "err", "gap":
		w.mu.Lock()
		if w.err == nil {
			w.err = br.Error
			if w.err == nil {
				w.err = &apiError{Description: fmt.Sprintf("fast batch %s at %d", br.Type, br.Seq)}
			}
		}
		w.mu.Unlock()
	default:
		w.mu.Lock()
		if !w.done {
			w.done, w.final = true, br
		}
		w.mu.Unlock()
	}
	w.signal()
}

func (w *batchWait) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// state returns what came of the batch so far.
func (w *batchWait) state() (done bool, final batchReply, flowErr *apiError, noResponders bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.done, w.final, w.err, w.noResponders
}

// ended reports whether the batch needs no more messages: it is done, a
// message was refused, or it reached no stream.
func (w *batchWait) ended() bool {
	done, _, flowErr, noResp := w.state()
	return done || flowErr != nil || noResp
}

// wait waits for a reply until deadline, or until the connection the batch
// went on ended; false: neither a reply nor the end came in time.
func (w *batchWait) wait(deadline time.Time, linkDone <-chan struct{}) bool {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-w.wake:
		return true
	case <-linkDone:
		return true
	case <-t.C:
		return false
	}
}

// errNoReply: a batch got no reply in time; its outcome is unknown.
type errNoReply struct{ what string }

func (e errNoReply) Error() string { return e.what }
func (e errNoReply) Unwrap() error { return nats.ErrTimeout }

// writeFast writes recs, or a leading part of them (how many: n), as one
// fast batch in "fail" mode, every record conditional on the name's fence:
//
//	recs[i]      Nats-Expected-Last-Subject-Sequence: c.fenceSeq
//	             Nats-Expected-Last-Subject-Sequence-Subject: c.fence      (the name's fence)
//
// Nothing lands after a refused message. The caller writes a fast batch
// only under a fence this store wrote itself, with the records' tail known
// since that fence (see Store.Append): then each record proves that nobody
// else wrote the subject since, for every other writer of the name moves
// the fence before it writes (a newer incarnation fences, another store
// claims), and nothing of the batch lands after anyone else's write.
//
// The frames are built and written in chunks while the server stores the
// ones before, at most fastWindow messages ahead of its last flow ack. A
// record that cannot be written (too large, an event time RFC 3339 cannot
// write) ends the batch before it (n is its index); the first such one
// fails the write, nothing sent.
//
// It returns how many of the n records the stream stored (a prefix) and
// the stream sequence of the last of them; err says why the rest was not
// (an *apiError for a refused check), or that the outcome is unknown (no
// reply within Config.Timeout of the last progress, or the connection
// broke: then the store claims the fence again before its next write).
func (s *Store) writeFast(c *check, producer string, recs []broker.Record) (n, stored int, last uint64, err error) {
	l, err := s.pub.link()
	if err != nil {
		return len(recs), 0, 0, err
	}
	id := nuid.Next()
	w := s.replies.register(id)
	defer s.replies.unregister(id)
	f := s.getFrames()
	defer s.putFrames(f)

	replyPrefix := s.replies.inbox + "." + id + "." + strconv.Itoa(fastFlow) + ".fail."
	var reply []byte
	setReply := func(seq uint64, op int) {
		reply = append(reply[:0], replyPrefix...)
		reply = strconv.AppendUint(reply, seq, 10)
		reply = append(reply, '.')
		reply = strconv.AppendInt(reply, int64(op), 10)
		reply = append(reply, ".$FI"...)
	}
	// Every record's header block begins with the check.
	var pre []byte
	pre = append(pre, hdrLine...)
	pre = append(pre, hdrExpectLastSubjSeq+": "...)
	pre = strconv.AppendUint(pre, c.fenceSeq, 10)
	pre = append(pre, "\r\n"+hdrExpectLastSubjSeqSubj+": "...)
	pre = append(pre, c.fence...)
	pre = append(pre, "\r\n"...)

	deadline := time.Now().Add(s.cfg.Timeout)
	queued := uint64(0) // the batch sequence of the last message in f.buf
	flush := func() error {
		// At most fastWindow messages beyond the last flow ack; nothing
		// more once the batch ended (a refused check).
		for queued > w.acked.Load()+fastWindow && !w.ended() {
			if err := l.ended(); err != nil {
				return err
			}
			if !w.wait(deadline, l.done) {
				return errNoReply{fmt.Sprintf("no flow ack in %v after %d of %d messages", s.cfg.Timeout, w.acked.Load(), len(recs))}
			}
			deadline = time.Now().Add(s.cfg.Timeout)
		}
		if w.ended() {
			return nil
		}
		err := s.pub.send(l, f.buf)
		f.buf = f.buf[:0]
		return err
	}
	n = len(recs)
	for i := range recs {
		r := &recs[i]
		f.hdr = append(f.hdr[:0], pre...)
		var rerr error
		if f.hdr, rerr = layout.AppendNativeHeaders(f.hdr, producer, r); rerr != nil {
			rerr = fmt.Errorf("inflight: natsjs: %s: record %d: %w", c.subject, r.Seq, rerr)
		} else if err := f.fits(r.Payload, l.maxPayload); err != nil {
			rerr = fmt.Errorf("%w: %s: record %d %w", ErrRecordTooLarge, c.subject, r.Seq, err)
		}
		if rerr != nil {
			if i == 0 {
				return 1, 0, 0, rerr
			}
			// End the batch before it (an end marker stores nothing); the
			// next write fails on it.
			n = i
			queued++
			setReply(queued, opEnd)
			f.pub(c.subject, reply, nil)
			break
		}
		op := opAppend
		switch {
		case i == len(recs)-1:
			op = opCommit // a batch of one record starts and commits with it
		case i == 0:
			op = opStart
		}
		queued++
		setReply(queued, op)
		f.end(c.subject, reply, r.Payload)
		if i+1 == firstChunk || len(f.buf) >= chunkBytes {
			if err := flush(); err != nil {
				s.pub.end(l, err)
				return n, 0, 0, withCause(err)
			}
			if s.afterChunk != nil {
				s.afterChunk(c.subject, i+1)
			}
			if w.ended() {
				break
			}
		}
	}
	if len(f.buf) > 0 {
		if err := flush(); err != nil {
			s.pub.end(l, err)
			return n, 0, 0, withCause(err)
		}
	}
	for {
		done, final, flowErr, noResp := w.state()
		switch {
		case done:
			stored, last, err = s.fastOutcome(n, final, flowErr)
			return n, stored, last, err
		case noResp:
			return n, 0, 0, nats.ErrNoResponders
		}
		if err := l.ended(); err != nil {
			return n, 0, 0, withCause(err)
		}
		if !w.wait(deadline, l.done) {
			err := errNoReply{fmt.Sprintf("no reply in %v to a fast batch of %d messages (%d acknowledged)", s.cfg.Timeout, n, w.acked.Load())}
			s.pub.end(l, err) // a connection that may be dead
			return n, 0, 0, withCause(err)
		}
		deadline = time.Now().Add(s.cfg.Timeout)
	}
}

// fastOutcome reads the PubAck of a fast batch of n records.
func (s *Store) fastOutcome(n int, final batchReply, flowErr *apiError) (int, uint64, error) {
	if final.Error != nil { // the first message was refused: nothing stored
		return 0, 0, final.Error
	}
	if final.Stream != s.cfg.Stream || final.Count > n || final.Count > 0 && final.Seq == 0 {
		return 0, 0, fmt.Errorf("fast batch reply from stream %q seq %d count %d, want stream %q and at most %d", final.Stream, final.Seq, final.Count, s.cfg.Stream, n)
	}
	stored, seq := final.Count, final.Seq
	switch {
	case stored == n:
		return stored, seq, nil
	case stored <= 0:
		stored, seq = 0, 0
	}
	if flowErr != nil {
		return stored, seq, flowErr
	}
	return stored, seq, errBatchEnded
}

// getFrames returns a frame builder from the store's pool.
func (s *Store) getFrames() *frames {
	if f, ok := s.framePool.Get().(*frames); ok {
		f.buf = f.buf[:0]
		return f
	}
	return &frames{buf: make([]byte, 0, 2*chunkBytes)}
}

// putFrames gives f back, unless it grew large (a batch of large records).
func (s *Store) putFrames(f *frames) {
	if cap(f.buf) <= 4*chunkBytes {
		s.framePool.Put(f)
	}
}
