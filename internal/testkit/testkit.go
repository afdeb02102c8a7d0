// Package testkit holds the helpers that the tests of several packages
// share: an error log to hand to core.ErrorHandler, a describer of frames
// for failure messages, and a producer that a test closes properly. It is internal: only the project's tests use
// it.
package testkit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/wire"
)

// ErrLog records the errors given to Add. It is safe for concurrent use;
// its zero value is ready.
type ErrLog struct {
	mu   sync.Mutex
	errs []error
}

// Add records err; pass it to core.ErrorHandler.
func (l *ErrLog) Add(err error) {
	l.mu.Lock()
	l.errs = append(l.errs, err)
	l.mu.Unlock()
}

// Snapshot returns the errors recorded so far.
func (l *ErrLog) Snapshot() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]error(nil), l.errs...)
}

// Has reports whether a recorded error matches target (errors.Is).
func (l *ErrLog) Has(target error) bool {
	return l.Find(func(err error) bool { return errors.Is(err, target) }) != nil
}

// Count returns how many recorded errors match target (errors.Is).
func (l *ErrLog) Count(target error) int {
	n := 0
	for _, err := range l.Snapshot() {
		if errors.Is(err, target) {
			n++
		}
	}
	return n
}

// Find returns the first recorded error that satisfies match, or nil.
func (l *ErrLog) Find(match func(error) bool) error {
	for _, err := range l.Snapshot() {
		if match(err) {
			return err
		}
	}
	return nil
}

// DescribeFrame names a frame for a failure message: its type, and for an
// ERROR its code and text.
func DescribeFrame(frame []byte) string {
	if frame == nil {
		return "no frame"
	}
	typ, err := wire.TypeOf(frame)
	if err != nil {
		return fmt.Sprintf("invalid frame (%v)", err)
	}
	if typ == wire.TypeError {
		if e, err := wire.DecodeError(frame); err == nil {
			return fmt.Sprintf("ERROR %v %q", e.Code, e.Text)
		}
	}
	return typ.String()
}

// NewProducer returns a producer on d named name, with a fast reconnect
// backoff and its errors in the returned log, after opts. At the end of the
// test it closes the producer (see CloseProducer) and then d.
func NewProducer(t testing.TB, d transport.Dialer, closeDialer func() error, name string, opts ...core.Option) (*core.Producer, *ErrLog) {
	t.Helper()
	log := &ErrLog{}
	opts = append([]core.Option{
		core.Name(name),
		core.ReconnectBackoff(5*time.Millisecond, 50*time.Millisecond),
		core.ErrorHandler(log.Add),
	}, opts...)
	p, err := core.New(d, opts...)
	if err != nil {
		t.Fatalf("core.New: %v", err)
	}
	t.Cleanup(func() {
		CloseProducer(t, p, 200*time.Millisecond)
		_ = closeDialer()
	})
	return p, log
}

// CloseProducer closes p with a context of quick, failing what is still
// pending, then waits (up to 10s, else the test fails) for the callbacks
// that Close left owed.
func CloseProducer(t testing.TB, p *core.Producer, quick time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), quick)
	defer cancel()
	_ = p.Close(ctx)
	end, endCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer endCancel()
	if err := p.Close(end); err != nil {
		t.Errorf("callbacks still owed 10s after Close: %v", err)
	}
}
