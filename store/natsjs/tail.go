package natsjs

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/inflightmq/inflight/store/natsjs/layout"
)

// tail is the last message of a subject as the store knows it.
type tail struct {
	streamSeq uint64 // its stream sequence; 0: the subject is empty
	last      uint64 // its Inflight-Last-Seq; 0: the subject is empty (or holds only a fence)
	epoch     uint64 // its writer's epoch as far as known: its Inflight-Epoch when read (0: none: empty, a native record, or a writer never fenced in)
}

// JetStream API error codes the store tells apart.
const (
	codeMsgNotFound    = 10037
	codeWrongLast      = 10071
	codeWrongLastConst = 10164 // replicated streams (R > 1)
	codeBatchDisabled  = 10205 // fast batch publish not allowed
)

// readTail reads the last message of subject: from the stream leader with
// the message-get API, or from any replica with a direct get.
func (s *Store) readTail(subject string, direct bool) (tail, error) {
	if direct {
		return s.readTailDirect(subject)
	}
	req, _ := json.Marshal(struct {
		LastBySubj string `json:"last_by_subj"`
	}{subject})
	resp, err := s.nc.Request("$JS.API.STREAM.MSG.GET."+s.cfg.Stream, req, s.cfg.Timeout)
	if err != nil {
		return tail{}, fmt.Errorf("%w: %s: %w", ErrRead, subject, withCause(err))
	}
	var r struct {
		Error   *apiError `json:"error"`
		Message *struct {
			Seq  uint64 `json:"seq"`
			Hdrs []byte `json:"hdrs"`
		} `json:"message"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return tail{}, fmt.Errorf("%w: %s: bad reply %.100q: %w", ErrRead, subject, resp.Data, err)
	}
	switch {
	case r.Error != nil && r.Error.ErrCode == codeMsgNotFound:
		return tail{}, nil
	case r.Error != nil:
		return tail{}, fmt.Errorf("%w: %s: %w", ErrRead, subject, r.Error)
	case r.Message == nil:
		return tail{}, fmt.Errorf("%w: %s: reply without message", ErrRead, subject)
	}
	var h nats.Header
	if len(r.Message.Hdrs) > 0 {
		if h, err = nats.DecodeHeadersMsg(r.Message.Hdrs); err != nil {
			return tail{}, fmt.Errorf("%w: %s: message %d: %w", ErrCorruptTail, subject, r.Message.Seq, err)
		}
	}
	return tailOf(subject, r.Message.Seq, h)
}

func (s *Store) readTailDirect(subject string) (tail, error) {
	resp, err := s.nc.Request("$JS.API.DIRECT.GET."+s.cfg.Stream+"."+subject, nil, s.cfg.Timeout)
	if err != nil {
		return tail{}, fmt.Errorf("%w: %s (direct): %w", ErrRead, subject, withCause(err))
	}
	if st := resp.Header.Get("Status"); st != "" {
		if st == "404" {
			return tail{}, nil
		}
		return tail{}, fmt.Errorf("%w: %s (direct): status %s %s", ErrRead, subject, st, resp.Header.Get("Description"))
	}
	seq, err := strconv.ParseUint(resp.Header.Get("Nats-Sequence"), 10, 64)
	if err != nil {
		return tail{}, fmt.Errorf("%w: %s (direct): bad Nats-Sequence %q", ErrRead, subject, resp.Header.Get("Nats-Sequence"))
	}
	return tailOf(subject, seq, resp.Header)
}

func tailOf(subject string, streamSeq uint64, h nats.Header) (tail, error) {
	last, epoch, err := layout.Tail(h)
	if err != nil {
		return tail{}, fmt.Errorf("%w: %s: message %d: %w", ErrCorruptTail, subject, streamSeq, err)
	}
	return tail{streamSeq: streamSeq, last: last, epoch: epoch}, nil
}

// apiError is a JetStream API error in a reply.
type apiError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

func (e *apiError) Error() string {
	return fmt.Sprintf("jetstream: %s (status %d, code %d)", e.Description, e.Code, e.ErrCode)
}

// isConflict reports a failed Nats-Expected-Last-Subject-Sequence.
func isConflict(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && (ae.ErrCode == codeWrongLast || ae.ErrCode == codeWrongLastConst)
}
