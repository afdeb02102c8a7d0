package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/wire"
)

// lineSource is produce -input: one message per line of a file or stdin,
// the line without its end ("\n", or "\r\n"), until the end of the input.
// With topics (-input-format topic-tab) a line is TOPIC<TAB>PAYLOAD: the
// topic is the text before its first tab ("": the producer's Topic).
// Lines are read on a goroutine of their own, a few ahead, so that an
// interrupt never waits for a line that may never come (a terminal).
type lineSource struct {
	lines    chan inputLine // closed at the end of the input
	topics   bool
	stop     chan struct{}
	stopOnce sync.Once
	closer   io.Closer // the file, nil for stdin

	readErr error // set by the reader before it closes lines
	ended   bool  // next saw lines closed: readErr may be read
}

// inputLine is one line of -input, split.
type inputLine struct {
	topic   string
	payload []byte
}

// maxLine is the longest line of -input: a payload of maxPayload after a
// topic of at most wire.MaxTopicLen bytes and its tab.
const maxLine = maxPayload + wire.MaxTopicLen + 1

// startLines starts reading r; c (if not nil) is closed by close. With
// topics each line starts with its topic and a tab.
func startLines(r io.Reader, c io.Closer, topics bool) *lineSource {
	s := &lineSource{lines: make(chan inputLine, 64), stop: make(chan struct{}), closer: c, topics: topics}
	go s.read(r)
	return s
}

func (s *lineSource) read(r io.Reader) {
	defer close(s.lines)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine+len("\r\n"))
	n := 0
	for sc.Scan() {
		n++
		var line inputLine
		payload := sc.Bytes()
		if s.topics {
			topic, rest, ok := bytes.Cut(payload, []byte{'\t'})
			if !ok {
				s.readErr = fmt.Errorf("line %d: no tab after a topic (-input-format topic-tab: TOPIC<TAB>PAYLOAD)", n)
				return
			}
			line.topic, payload = string(topic), rest
		}
		if len(payload) > maxPayload {
			s.readErr = fmt.Errorf("line %d: longer than the limit of %d bytes", n, maxPayload)
			return
		}
		line.payload = bytes.Clone(payload) // the producer holds it until its callback
		select {
		case s.lines <- line:
		case <-s.stop:
			return
		}
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		s.readErr = fmt.Errorf("line %d: longer than the limit of %d bytes", n+1, maxPayload)
	} else if err != nil {
		s.readErr = fmt.Errorf("after line %d: %w", n, err)
	}
}

func (s *lineSource) next(ctx context.Context, m *core.Message, _ uint64) bool {
	select {
	case line, ok := <-s.lines:
		if !ok {
			s.ended = true
			return false
		}
		m.Topic, m.Payload = line.topic, line.payload
		return true
	case <-ctx.Done():
		return false
	}
}

// err is why the input ended early: a line too long, a read error.
func (s *lineSource) err() error {
	if !s.ended {
		return nil // stopped before the end: not read, and nothing to say
	}
	return s.readErr
}

// close stops the reader (it may still be blocked in a read of stdin: the
// process exits without it) and closes the file.
func (s *lineSource) close() {
	s.stopOnce.Do(func() {
		close(s.stop)
		if s.closer != nil {
			_ = s.closer.Close()
		}
	})
}
