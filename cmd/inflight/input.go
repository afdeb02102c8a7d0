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
)

// lineSource is produce -input: one message per line of a file or stdin,
// the line without its end ("\n", or "\r\n"), until the end of the input.
// Lines are read on a goroutine of their own, a few ahead, so that an
// interrupt never waits for a line that may never come (a terminal).
type lineSource struct {
	lines    chan []byte // closed at the end of the input
	stop     chan struct{}
	stopOnce sync.Once
	closer   io.Closer // the file, nil for stdin

	readErr error // set by the reader before it closes lines
	ended   bool  // next saw lines closed: readErr may be read
}

// startLines starts reading r; c (if not nil) is closed by close.
func startLines(r io.Reader, c io.Closer) *lineSource {
	s := &lineSource{lines: make(chan []byte, 64), stop: make(chan struct{}), closer: c}
	go s.read(r)
	return s
}

func (s *lineSource) read(r io.Reader) {
	defer close(s.lines)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxPayload+len("\r\n"))
	n := 0
	for sc.Scan() {
		n++
		line := bytes.Clone(sc.Bytes()) // the producer holds it until its callback
		if len(line) > maxPayload {
			s.readErr = fmt.Errorf("line %d: longer than the limit of %d bytes", n, maxPayload)
			return
		}
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
		m.Payload = line
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
