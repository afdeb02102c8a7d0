package natsjs

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
)

// Headers of the JetStream publish protocol.
const (
	hdrExpectLastSubjSeq = "Nats-Expected-Last-Subject-Sequence"
	hdrExpectStream      = "Nats-Expected-Stream"
	hdrBatchID           = "Nats-Batch-Id"
	hdrBatchSeq          = "Nats-Batch-Sequence"
	hdrBatchCommit       = "Nats-Batch-Commit"
)

// pubAck is the reply to a JetStream publish or batch commit.
type pubAck struct {
	Error  *apiError `json:"error"`
	Stream string    `json:"stream"`
	Seq    uint64    `json:"seq"`
	Count  int       `json:"count"`
}

// request writes m as a request and returns the stream sequence of the
// stored message; m's headers must hold the compare-and-set. The reply
// error is an *apiError (isConflict tells a lost compare-and-set).
func (s *Store) request(m *nats.Msg) (uint64, error) {
	resp, err := s.nc.RequestMsg(m, s.cfg.Timeout)
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

// setCAS makes h a compare-and-set on the subject's tail at stream
// sequence expect (0: the subject must be empty) in this store's stream.
func (s *Store) setCAS(h nats.Header, expect uint64) {
	h[hdrExpectLastSubjSeq] = []string{strconv.FormatUint(expect, 10)}
	h[hdrExpectStream] = []string{s.cfg.Stream}
}

// publishBatch writes msgs as one atomic batch (ADR-50): the first carries
// the compare-and-set, every message but the last is a plain publish, the
// last commits and is a request whose reply is the batch's ack. The server
// stores all of them or none; a batch never committed (the connection
// dropped midway) is discarded by the server.
func (s *Store) publishBatch(msgs []*nats.Msg, expect uint64) (uint64, error) {
	id := nuid.Next()
	s.setCAS(msgs[0].Header, expect)
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
	return s.request(last)
}
