package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

// troubleSummaryEvery is how often repeats of one connection error are
// summarized.
const troubleSummaryEvery = 5 * time.Second

// handshakeTimeout is produce's core.HandshakeTimeout.
const handshakeTimeout = 2 * time.Second

// trouble reports the producer's connection errors (from core.ErrorHandler:
// failed dials, failed handshakes, lost connections) as they happen: an
// error unlike the previous one is printed at once; repeats of the same one
// are counted and summarized every summaryEvery, e.g.
//
//	connection: dial 127.0.0.1:1: connection refused
//	connection: dial 127.0.0.1:1: connection refused (x12 in 5s)
//
// observe only records and wakes the printer, so it never blocks the
// producer's goroutine on the terminal.
type trouble struct {
	print        func(string)
	summaryEvery time.Duration

	mu      sync.Mutex
	queue   []string  // new errors to print
	last    string    // the latest error
	repeats int       // of last, since the last line about it
	since   time.Time // start of the repeats' period

	wake      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// startTrouble starts the printer goroutine; stop it with close.
func startTrouble(print func(string), summaryEvery time.Duration) *trouble {
	t := &trouble{
		print: print, summaryEvery: summaryEvery,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go t.run()
	return t
}

// observe is the producer's ErrorHandler: safe for concurrent use, never
// blocks.
func (t *trouble) observe(err error) {
	msg := describe(err)
	t.mu.Lock()
	if msg == t.last {
		if t.repeats == 0 {
			t.since = time.Now()
		}
		t.repeats++
		t.mu.Unlock()
		return
	}
	t.queue = append(t.queue, t.summaryLocked(), msg)
	t.last = msg
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// summaryLocked returns the line about last's uncounted repeats ("" if
// none) and resets the count.
func (t *trouble) summaryLocked() string {
	if t.repeats == 0 {
		return ""
	}
	line := fmt.Sprintf("%s (x%d in %s)", t.last, t.repeats, roundDuration(time.Since(t.since)))
	t.repeats = 0
	return line
}

func (t *trouble) run() {
	defer close(t.done)
	tick := time.NewTicker(t.summaryEvery)
	defer tick.Stop()
	for {
		select {
		case <-t.wake:
		case <-tick.C:
			t.mu.Lock()
			t.queue = append(t.queue, t.summaryLocked())
			t.mu.Unlock()
		case <-t.stop:
			t.flush()
			return
		}
		t.flush()
	}
}

// flush prints what is queued.
func (t *trouble) flush() {
	t.mu.Lock()
	lines := t.queue
	t.queue = nil
	t.mu.Unlock()
	for _, l := range lines {
		if l != "" {
			t.print("connection: " + l)
		}
	}
}

// close prints the pending summary and stops the printer; later calls do
// nothing. Call it after the producer's Close, so that no error comes after.
func (t *trouble) close() {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		t.queue = append(t.queue, t.summaryLocked())
		t.mu.Unlock()
		close(t.stop)
		<-t.done
	})
}

// describe shortens an error for a human: "dial 127.0.0.1:1: connection
// refused" rather than "inflight: dial: dial tcp 127.0.0.1:1: connect:
// connection refused".
func describe(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" && op.Addr != nil {
		cause := op.Err
		var sys *os.SyscallError
		if errors.As(cause, &sys) {
			cause = sys.Err
		}
		return fmt.Sprintf("dial %s: %v", op.Addr, cause)
	}
	return strings.TrimPrefix(err.Error(), "inflight: ")
}
