package main

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// watchWriter is an output that a test can wait on: safe for concurrent
// writes, and wait returns the first match of a pattern once it appears.
type watchWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced on every write
}

func newWatchWriter() *watchWriter { return &watchWriter{changed: make(chan struct{})} }

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.changed)
	w.changed = make(chan struct{})
	return w.buf.Write(p)
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// wait returns the submatches of re's first match, failing the test if it
// has not appeared within limit; the failure shows the output and every
// goroutine's stack, so that a rare one explains itself.
func (w *watchWriter) wait(t *testing.T, re *regexp.Regexp, limit time.Duration) []string {
	t.Helper()
	deadline := time.After(limit)
	for {
		w.mu.Lock()
		m := re.FindStringSubmatch(w.buf.String())
		changed := w.changed
		w.mu.Unlock()
		if m != nil {
			return m
		}
		select {
		case <-changed:
		case <-deadline:
			stacks := make([]byte, 1<<20)
			stacks = stacks[:runtime.Stack(stacks, true)]
			t.Fatalf("no %q in the output within %v; output:\n%s\ngoroutines:\n%s", re, limit, w.String(), stacks)
		}
	}
}

// runAsync runs the command on its own goroutine; the returned function
// waits (bounded) for its exit code.
func runAsync(t *testing.T, ctx context.Context, stdout, stderr io.Writer, args ...string) func() int {
	t.Helper()
	return runAsyncWithin(t, 30*time.Second, ctx, stdout, stderr, args...)
}

// runAsyncWithin is runAsync whose returned function waits up to limit;
// if the command has not exited by then it fails the test, showing what
// the command wrote to stdout (if a watchWriter) and every goroutine's
// stack.
func runAsyncWithin(t *testing.T, limit time.Duration, ctx context.Context, stdout, stderr io.Writer, args ...string) func() int {
	t.Helper()
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, strings.NewReader(""), stdout, stderr) }()
	return func() int {
		t.Helper()
		select {
		case code := <-done:
			return code
		case <-time.After(limit):
			stacks := make([]byte, 1<<20)
			stacks = stacks[:runtime.Stack(stacks, true)]
			var output string
			if w, ok := stdout.(*watchWriter); ok {
				output = w.String()
			}
			t.Fatalf("inflight %s did not exit within %v; output:\n%s\ngoroutines:\n%s", strings.Join(args, " "), limit, output, stacks)
			return -1
		}
	}
}
