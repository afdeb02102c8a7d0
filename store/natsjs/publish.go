package natsjs

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
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
	resp, err := s.nc.RequestMsg(m, s.cfg.Timeout)
	for wait := 5 * time.Millisecond; errors.Is(err, nats.ErrNoResponders) && time.Now().Add(wait).Before(deadline); wait = min(2*wait, 200*time.Millisecond) {
		time.Sleep(wait) // bounded by the store's Timeout
		resp, err = s.nc.RequestMsg(m, time.Until(deadline))
	}
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
// tail and the producer name's fence, each at the stream sequence the
// store knows.
type check struct {
	subject    string // the records' subject
	subjectSeq uint64
	fence      string // the name's fence subject
	fenceSeq   uint64
	mark       string // where a mark goes when the batch has one message
	markEpoch  uint64
	marked     bool // set by publishBatch: a mark was written after msgs
	fast       bool // the write is a fast batch (publishFast)
}

// publishBatch writes msgs (on c.subject) as one atomic batch (ADR-50) that
// the stream stores only if both checks hold:
//
//	msgs[0]   Nats-Expected-Last-Subject-Sequence: c.subjectSeq          (the records' subject)
//	msgs[1]   Nats-Expected-Last-Subject-Sequence: c.fenceSeq
//	          Nats-Expected-Last-Subject-Sequence-Subject: c.fence       (the name's fence)
//
// The server takes one check per message, and one on a subject before the
// batch writes it: so the records' subject is checked first, the fence by
// the second message. A batch of one record gets a second message for
// the fence check: a mark on c.mark (outside the consumers' subjects;
// Nats-Rollup keeps one per name). Every message but the last is a plain
// publish, the last commits and is a request whose reply is the batch's
// ack; a batch never committed (the connection dropped midway) is
// discarded by the server. It returns the stream sequence of the last
// message of msgs.
func (s *Store) publishBatch(msgs []*nats.Msg, c *check) (uint64, error) {
	c.marked = len(msgs) == 1
	if c.marked {
		msgs = append(msgs, s.markMsg(c))
	}
	s.setCAS(msgs[0].Header, "", c.subjectSeq)
	s.setCAS(msgs[1].Header, c.fence, c.fenceSeq)
	id := nuid.Next()
	for i, m := range msgs {
		m.Header[hdrBatchID] = []string{id}
		m.Header[hdrBatchSeq] = []string{strconv.Itoa(i + 1)}
	}
	last := msgs[len(msgs)-1]
	for _, m := range msgs[:len(msgs)-1] {
		if err := s.nc.PublishMsg(m); err != nil {
			return 0, err
		}
	}
	last.Header[hdrBatchCommit] = []string{"1"}
	seq, err := s.request(last)
	if err == nil && c.marked {
		// An atomic batch takes consecutive stream sequences: the record
		// is just before the mark. (Were it not, the next write's
		// compare-and-set would fail and the store would read the tail.)
		seq--
	}
	return seq, err
}
