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

	"github.com/inflightmq/inflight/store/natsjs/layout"
)

// Fast batch publish (ADR-50, nats-server 2.14): the messages of a batch
// are stored as they arrive, not staged; the batch's id, its sequence and
// the operation travel in each message's reply subject:
//
//	<inbox>.<batch id>.<flow>.fail.<batch seq>.<op>.$FI      op: 0 start, 1 append, 2 commit
//
// The server answers on that subject: a flow ack {"type":"ack","seq":N}
// every few messages (N and all before it are stored), {"type":"err"} for a
// message it refused, and the PubAck of the commit ({"seq": stream
// sequence of the last stored message, "count": messages stored}). In
// "fail" mode a refused message ends the batch: what is stored is a prefix.
const (
	// fastFlow is the flow ack interval asked of the server; the writer
	// keeps at most two intervals unacknowledged, as `nats bench js pub
	// fast` does.
	fastFlow = 500

	opStart, opAppend, opCommit = 0, 1, 2
)

// errBatchEnded: the server ended a fast batch early without saying why.
var errBatchEnded = errors.New("fast batch ended early")

// fastReply is any reply of the server on a fast batch's reply subjects.
type fastReply struct {
	Type   string    `json:"type"` // "ack", "err", "gap"; "" for the PubAck
	Seq    uint64    `json:"seq"`
	Stream string    `json:"stream"`
	Count  int       `json:"count"`
	Error  *apiError `json:"error"`
}

// fastBatches routes the replies of a Store's fast batches (one
// subscription on <inbox>.>) to their writers. Safe for concurrent use.
type fastBatches struct {
	inbox string
	sub   *nats.Subscription

	mu    sync.Mutex
	waits map[string]*fastWait // by batch id; guarded by mu
}

// fastWait is what a writer learns of its batch. The subscription's
// goroutine sets it and never blocks (wake has room for one signal).
type fastWait struct {
	acked atomic.Uint64 // the highest batch sequence a flow ack confirmed
	wake  chan struct{}

	mu    sync.Mutex
	done  bool      // the PubAck (or a refusal of the whole batch) came
	final fastReply // guarded by mu, set once done
	err   *apiError // the first message refused; guarded by mu
}

func newFastBatches(nc *nats.Conn) (*fastBatches, error) {
	f := &fastBatches{inbox: nc.NewRespInbox(), waits: make(map[string]*fastWait)}
	sub, err := nc.Subscribe(f.inbox+".>", f.handle)
	if err != nil {
		return nil, fmt.Errorf("inflight: natsjs: fast batch replies: %w", err)
	}
	// Replies are small and must not be dropped as a slow consumer's.
	_ = sub.SetPendingLimits(-1, -1)
	f.sub = sub
	return f, nil
}

func (f *fastBatches) close() { _ = f.sub.Unsubscribe() }

func (f *fastBatches) register(id string) *fastWait {
	w := &fastWait{wake: make(chan struct{}, 1)}
	f.mu.Lock()
	f.waits[id] = w
	f.mu.Unlock()
	return w
}

func (f *fastBatches) unregister(id string) {
	f.mu.Lock()
	delete(f.waits, id)
	f.mu.Unlock()
}

// handle runs on the subscription's goroutine.
func (f *fastBatches) handle(m *nats.Msg) {
	id, _, _ := strings.Cut(strings.TrimPrefix(m.Subject, f.inbox+"."), ".")
	f.mu.Lock()
	w := f.waits[id]
	f.mu.Unlock()
	if w == nil {
		return // a batch already given up, or answers to messages after its end
	}
	var r fastReply
	if err := json.Unmarshal(m.Data, &r); err != nil {
		r = fastReply{Error: &apiError{Description: fmt.Sprintf("bad fast batch reply %.100q", m.Data)}}
	}
	switch r.Type {
	case "ack":
		for {
			cur := w.acked.Load()
			if r.Seq <= cur || w.acked.CompareAndSwap(cur, r.Seq) {
				break
			}
		}
	case "err", "gap":
		w.mu.Lock()
		if w.err == nil {
			w.err = r.Error
			if w.err == nil {
				w.err = &apiError{Description: fmt.Sprintf("fast batch %s at %d", r.Type, r.Seq)}
			}
		}
		w.mu.Unlock()
	default:
		w.mu.Lock()
		if !w.done {
			w.done, w.final = true, r
		}
		w.mu.Unlock()
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// result returns the batch's end, if it came.
func (w *fastWait) result() (done bool, final fastReply, flowErr *apiError) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.done, w.final, w.err
}

// wait waits for a reply, at most d; false: none came in time.
func (w *fastWait) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.wake:
		return true
	case <-t.C:
		return false
	}
}

// publishFast writes msgs (on c.subject) as one fast batch in "fail" mode
// after a mark (on c.mark, outside the consumers' subjects; Nats-Rollup
// keeps one per name), every message conditional:
//
//	mark         Nats-Expected-Last-Subject-Sequence: c.subjectSeq
//	             Nats-Expected-Last-Subject-Sequence-Subject: c.subject    (the records' subject)
//	msgs[i]      Nats-Expected-Last-Subject-Sequence: c.fenceSeq
//	             Nats-Expected-Last-Subject-Sequence-Subject: c.fence      (the name's fence)
//
// Nothing lands after a refused message. The mark proves the tail the
// store knows is the subject's; each record then proves the name's fence
// has not moved, so no other incarnation came in, and the writers of older
// ones are refused by the fence too: only this store's session writes the
// subject until the batch ends. (A batch of this session whose outcome the
// store never learned could still land: see Store.refence.)
//
// It returns how many of msgs the stream stored (a prefix) and the stream
// sequence of the last of them; err says why the rest was not (an
// *apiError for a refused check), or that the outcome is unknown (no reply
// within Config.Timeout of the last progress).
func (s *Store) publishFast(msgs []*nats.Msg, c *check) (stored int, last uint64, err error) {
	c.marked = true
	mark := s.markMsg(c)
	s.setCAS(mark.Header, c.subject, c.subjectSeq)
	for _, m := range msgs {
		s.setCAS(m.Header, c.fence, c.fenceSeq)
	}
	msgs = append([]*nats.Msg{mark}, msgs...)
	id := nuid.Next()
	w := s.fast.register(id)
	defer s.fast.unregister(id)
	prefix := s.fast.inbox + "." + id + "." + strconv.Itoa(fastFlow) + ".fail."
	buf := make([]byte, 0, len(prefix)+32)
	for i, m := range msgs {
		op := opAppend
		switch {
		case i == len(msgs)-1:
			op = opCommit
		case i == 0:
			op = opStart
		}
		buf = append(buf[:0], prefix...)
		buf = strconv.AppendInt(buf, int64(i+1), 10)
		buf = append(buf, '.')
		buf = strconv.AppendInt(buf, int64(op), 10)
		buf = append(buf, ".$FI"...)
		m.Reply = string(buf)
		// Flow control: at most two intervals ahead of the last ack; stop
		// sending once the batch ended (a refused check).
		for uint64(i) >= w.acked.Load()+2*fastFlow {
			if done, _, flowErr := w.result(); done || flowErr != nil {
				break
			}
			if !w.wait(s.cfg.Timeout) {
				return 0, 0, fmt.Errorf("%w: no flow ack in %v after %d of %d messages", nats.ErrTimeout, s.cfg.Timeout, w.acked.Load(), len(msgs))
			}
		}
		if done, _, flowErr := w.result(); done || flowErr != nil {
			break
		}
		if err := s.nc.PublishMsg(m); err != nil {
			return 0, 0, err
		}
	}
	for {
		done, final, flowErr := w.result()
		if done {
			return s.fastOutcome(msgs, c, final, flowErr)
		}
		if !w.wait(s.cfg.Timeout) {
			return 0, 0, fmt.Errorf("%w: no reply in %v to a fast batch of %d messages (%d acknowledged)", nats.ErrTimeout, s.cfg.Timeout, len(msgs), w.acked.Load())
		}
	}
}

// fastOutcome reads a fast batch's PubAck.
func (s *Store) fastOutcome(msgs []*nats.Msg, c *check, final fastReply, flowErr *apiError) (int, uint64, error) {
	if final.Error != nil { // the first message was refused: nothing stored
		return 0, 0, final.Error
	}
	if final.Stream != s.cfg.Stream || final.Count > len(msgs) || final.Count > 0 && final.Seq == 0 {
		return 0, 0, fmt.Errorf("fast batch reply from stream %q seq %d count %d, want stream %q and at most %d", final.Stream, final.Seq, final.Count, s.cfg.Stream, len(msgs))
	}
	n, seq := final.Count-1, final.Seq // the mark came first
	switch {
	case n == len(msgs)-1:
		return n, seq, nil
	case n <= 0:
		n, seq = 0, 0
	}
	if flowErr != nil {
		return n, seq, flowErr
	}
	return n, seq, errBatchEnded
}

// markMsg returns the second message of a one-record write: a mark on
// c.mark (outside the consumers' subjects; Nats-Rollup keeps one per name).
func (s *Store) markMsg(c *check) *nats.Msg {
	m := &nats.Msg{Subject: c.mark, Header: make(nats.Header, 8)}
	m.Header[layout.HdrLayout] = []string{layout.Mark}
	layout.SetEpoch(m.Header, c.markEpoch)
	m.Header[hdrRollup] = []string{"sub"}
	return m
}
