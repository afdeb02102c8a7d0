package natsjs

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/inflightmq/inflight/store/natsjs/layout"
)

// Headers of the JetStream publish protocol.
const (
	hdrExpectLastSubjSeq     = "Nats-Expected-Last-Subject-Sequence"
	hdrExpectLastSubjSeqSubj = "Nats-Expected-Last-Subject-Sequence-Subject"
	hdrBatchID               = "Nats-Batch-Id"
	hdrBatchSeq              = "Nats-Batch-Sequence"
	hdrBatchCommit           = "Nats-Batch-Commit"
	hdrRollup                = "Nats-Rollup"
)

// pubAck is the reply to a JetStream publish or batch commit.
type pubAck struct {
	Error  *apiError `json:"error"`
	Stream string    `json:"stream"`
	Seq    uint64    `json:"seq"`
	Count  int       `json:"count"`
}

// request writes m as a request and returns the stream sequence of the
// stored message (of a batch: its last message). The reply error is an
// *apiError (isConflict tells a lost compare-and-set).
//
// A request that found no responder (the stream has no leader yet, or the
// interest of a new one has not reached this server) was delivered to
// nobody, so it is sent again, for at most the store's Timeout.
func (s *Store) request(m *nats.Msg) (uint64, error) {
	deadline := time.Now().Add(s.cfg.Timeout)
	var resp *nats.Msg
	err := s.retryNoResponders(func() (err error) {
		resp, err = s.nc.RequestMsg(m, max(time.Until(deadline), time.Millisecond))
		return err
	})
	if err != nil {
		return 0, err
	}
	var ack pubAck
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return 0, fmt.Errorf("bad publish reply %.100q: %w", resp.Data, err)
	}
	if ack.Error != nil {
		return 0, ack.Error
	}
	if ack.Stream != s.cfg.Stream || ack.Seq == 0 {
		return 0, fmt.Errorf("publish reply from stream %q seq %d, want stream %q", ack.Stream, ack.Seq, s.cfg.Stream)
	}
	return ack.Seq, nil
}

// setCAS makes h a compare-and-set on the tail of subject (empty: the
// message's own) at stream sequence expect (0: it must be empty). (No
// Nats-Expected-Stream: the stream captures the subjects, and the headers
// stay in every stored message.)
func (s *Store) setCAS(h nats.Header, subject string, expect uint64) {
	h[hdrExpectLastSubjSeq] = []string{strconv.FormatUint(expect, 10)}
	if subject != "" {
		h[hdrExpectLastSubjSeqSubj] = []string{subject}
	}
}

// check is the state one write is conditional on: the record subject's
// tail (an atomic batch's) and the producer name's fence, each at the
// stream sequence the store knows.
type check struct {
	subject    string // the records' subject
	subjectSeq uint64
	fence      string // the name's fence subject
	fenceSeq   uint64
	mark       string // where a mark goes (an atomic batch's second message, when it has one record)
	markEpoch  uint64
	marked     bool // set by writeAtomic: a mark was written with the records
}

// batchMsg builds message i of an atomic batch: after the batch's own
// header lines, it adds its own (f.line, ...) and returns its payload and
// what it holds, for errors ("record 42"). It must build the same message
// when called again for the same i.
type batchMsg func(f *frames, i int) (payload []byte, what string, err error)

// writeAtomic writes up to k messages on c.subject, built by msg, as one
// atomic batch (ADR-50) that the stream stores only if both checks hold:
//
//	message 1   Nats-Expected-Last-Subject-Sequence: c.subjectSeq          (the records' subject)
//	message 2   Nats-Expected-Last-Subject-Sequence: c.fenceSeq
//	            Nats-Expected-Last-Subject-Sequence-Subject: c.fence       (the name's fence)
//
// The server takes one check per message, and one on a subject before the
// batch writes it: so the records' subject is checked first, the fence by
// the second message. A batch of one message gets a second one for the
// fence check: a mark on c.mark (outside the consumers' subjects;
// Nats-Rollup keeps one per name). The last message commits; the batch's
// PubAck comes to the store's reply subscription, and a batch never
// committed (the connection dropped midway) is discarded by the server.
// A message msg cannot build ends the batch before it (n is its index);
// the first one fails the write, nothing sent. A commit that reached no
// stream (no responders: no stream leader yet) is sent again, as a new
// batch, for at most the store's Timeout: nothing of it was stored.
//
// It returns how many messages were written and the stream sequence of
// the last of them; an error means none was stored (an *apiError for a
// refused check), or that the outcome is unknown.
func (s *Store) writeAtomic(c *check, k int, msg batchMsg) (n int, last uint64, err error) {
	deadline := time.Now().Add(s.cfg.Timeout)
	err = s.retryNoResponders(func() error {
		n, last, err = s.atomicOnce(c, k, msg, deadline)
		return err
	})
	return n, last, err
}

// retryNoResponders calls write again while it fails with no responders
// (a write that reached no stream, so stored nothing: the stream has no
// leader yet, or its interest has not reached this server), waiting a
// little more each time, for at most the store's Timeout.
func (s *Store) retryNoResponders(write func() error) error {
	deadline := time.Now().Add(s.cfg.Timeout)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		err := write()
		if !errors.Is(err, nats.ErrNoResponders) || !time.Now().Add(wait).Before(deadline) {
			return err
		}
		time.Sleep(wait) // bounded by the store's Timeout
	}
}

func (s *Store) atomicOnce(c *check, k int, msg batchMsg, deadline time.Time) (n int, last uint64, err error) {
	l, err := s.pub.link()
	if err != nil {
		return k, 0, err
	}
	id := nuid.Next()
	w := s.replies.register(id)
	defer s.replies.unregister(id)
	f := s.getFrames()
	defer s.putFrames(f)
	commit := []byte(s.replies.inbox + "." + id + commitReply)

	// build appends message i (batch sequence i+1) to f.buf; a message
	// that cannot be built or does not fit leaves f.buf as it was.
	build := func(i int, isLast bool) error {
		f.begin()
		f.line(hdrBatchID, id)
		f.lineUint(hdrBatchSeq, uint64(i+1))
		switch i {
		case 0:
			f.lineUint(hdrExpectLastSubjSeq, c.subjectSeq)
		case 1:
			f.lineUint(hdrExpectLastSubjSeq, c.fenceSeq)
			f.line(hdrExpectLastSubjSeqSubj, c.fence)
		}
		var reply []byte
		if isLast {
			f.line(hdrBatchCommit, "1")
			reply = commit
		}
		payload, what, err := msg(f, i)
		if err != nil {
			return err
		}
		if err := f.fits(payload, l.maxPayload); err != nil {
			return fmt.Errorf("%w: %s: %s %w", ErrRecordTooLarge, c.subject, what, err)
		}
		f.end(c.subject, reply, payload)
		return nil
	}
	starts := make([]int, 0, k)
	n = k
	for i := range k {
		starts = append(starts, len(f.buf))
		if err := build(i, i == k-1 && k > 1); err != nil {
			if i == 0 {
				return 1, 0, err
			}
			// Commit with the message before it.
			n = i
			if n > 1 {
				f.buf = f.buf[:starts[n-1]]
				if err := build(n-1, true); err != nil {
					return n, 0, err
				}
			}
			break
		}
	}
	c.marked = n == 1
	if c.marked {
		f.begin()
		f.line(hdrBatchID, id)
		f.lineUint(hdrBatchSeq, 2)
		f.lineUint(hdrExpectLastSubjSeq, c.fenceSeq)
		f.line(hdrExpectLastSubjSeqSubj, c.fence)
		f.line(hdrBatchCommit, "1")
		f.line(layout.HdrLayout, layout.Mark)
		if c.markEpoch > 0 {
			f.lineUint(layout.HdrEpoch, c.markEpoch)
		}
		f.line(hdrRollup, "sub")
		f.end(c.mark, commit, nil)
	}
	if err := s.pub.send(l, f.buf); err != nil {
		return n, 0, withCause(err)
	}
	for {
		done, final, _, noResp := w.state()
		switch {
		case done:
			if final.Error != nil {
				return n, 0, final.Error
			}
			if final.Stream != s.cfg.Stream || final.Seq == 0 {
				return n, 0, fmt.Errorf("publish reply from stream %q seq %d, want stream %q", final.Stream, final.Seq, s.cfg.Stream)
			}
			seq := final.Seq
			if c.marked {
				// An atomic batch takes consecutive stream sequences: the
				// record is just before the mark. (Were it not, the next
				// write's compare-and-set would fail and the store would
				// read the tail.)
				seq--
			}
			return n, seq, nil
		case noResp:
			return n, 0, nats.ErrNoResponders
		}
		if err := l.ended(); err != nil {
			return n, 0, withCause(err)
		}
		if !w.wait(deadline, l.done) {
			err := errNoReply{fmt.Sprintf("no reply in %v to an atomic batch of %d messages", s.cfg.Timeout, n)}
			s.pub.end(l, err) // a connection that may be dead
			return n, 0, withCause(err)
		}
	}
}
