// Package testkit holds the helpers that the tests of several packages
// share: an error log to hand to core.ErrorHandler, a describer of frames
// for failure messages, and a producer that a test closes properly. It is internal: only the project's tests use
// it.
package testkit

import (
	"errors"
	"fmt"
	"sync"

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
