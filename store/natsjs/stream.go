package natsjs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// StreamConfig describes the stream EnsureStream creates or checks.
type StreamConfig struct {
	// Name and Prefix as in Config (Prefix default "inflight"); the stream
	// captures Prefix + ".>".
	Name   string
	Prefix string
	// Replicas, default 1; 3 survives the loss of one server.
	Replicas int
	// Storage, default jetstream.FileStorage.
	Storage jetstream.StorageType
	// MaxAge bounds how long a message is kept (0: forever). It must
	// outlive the longest time a producer may be away with messages
	// pending: once its subject ages out, LastSeq falls back to 0 and its
	// resent records would be stored again.
	MaxAge time.Duration
	// MaxBytes bounds the stream's size (0: no limit). Old messages are
	// discarded first, with the same caveat as MaxAge.
	MaxBytes int64
	// AllowDirect lets any replica answer reads (for ReadDirect).
	AllowDirect bool
	// AtomicPublish allows atomic batches (needed by LayoutPerRecord,
	// nats-server 2.12 or later).
	AtomicPublish bool
}

// EnsureStream creates the stream if it does not exist, or checks that the
// existing one fits: it captures Prefix + ".>", keeps messages by limits
// (not work-queue or interest retention, which delete what LastSeq needs),
// has the replicas and storage asked for, and allows atomic publish if
// asked. A stream that does not fit yields ErrStreamMismatch; EnsureStream
// never changes an existing stream.
//
// Right after a cluster forms, placement may fail for a moment ("no
// suitable peers"); EnsureStream retries until ctx ends.
func EnsureStream(ctx context.Context, js jetstream.JetStream, c StreamConfig) (jetstream.Stream, error) {
	if err := c.setDefaults(); err != nil {
		return nil, err
	}
	want := jetstream.StreamConfig{
		Name:               c.Name,
		Subjects:           []string{c.Prefix + ".>"},
		Retention:          jetstream.LimitsPolicy,
		Storage:            c.Storage,
		Replicas:           c.Replicas,
		MaxAge:             c.MaxAge,
		MaxBytes:           c.MaxBytes,
		AllowDirect:        c.AllowDirect,
		AllowAtomicPublish: c.AtomicPublish,
		Discard:            jetstream.DiscardOld,
	}
	if c.MaxBytes == 0 {
		want.MaxBytes = -1
	}
	for {
		s, err := js.Stream(ctx, c.Name)
		if err == nil {
			return s, checkStream(s.CachedInfo().Config, c)
		}
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, fmt.Errorf("inflight: natsjs: stream %q: %w", c.Name, err)
		}
		s, err = js.CreateStream(ctx, want)
		if err == nil {
			return s, nil
		}
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			continue // created meanwhile by another gateway: check it
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("inflight: natsjs: create stream %q: %w", c.Name, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// setDefaults fills in the defaults and checks the fields.
func (c *StreamConfig) setDefaults() error {
	if err := checkNames(c.Name, &c.Prefix); err != nil {
		return err
	}
	switch {
	case c.Replicas == 0:
		c.Replicas = 1
	case c.Replicas < 0 || c.Replicas > 5:
		return fmt.Errorf("%w: Replicas %d not in [1, 5]", ErrInvalidConfig, c.Replicas)
	}
	if c.Storage != jetstream.FileStorage && c.Storage != jetstream.MemoryStorage {
		return fmt.Errorf("%w: storage %v", ErrInvalidConfig, c.Storage)
	}
	if c.MaxAge < 0 || c.MaxBytes < 0 {
		return fmt.Errorf("%w: MaxAge %v, MaxBytes %d", ErrInvalidConfig, c.MaxAge, c.MaxBytes)
	}
	return nil
}

// checkStream says why an existing stream does not fit c.
func checkStream(got jetstream.StreamConfig, c StreamConfig) error {
	all := c.Prefix + ".>"
	switch {
	case !slices.Contains(got.Subjects, all) && !slices.Contains(got.Subjects, ">"):
		return fmt.Errorf("%w: stream %q captures %q, not %q", ErrStreamMismatch, c.Name, got.Subjects, all)
	case got.Retention != jetstream.LimitsPolicy:
		return fmt.Errorf("%w: stream %q has retention %v; the store needs limits retention", ErrStreamMismatch, c.Name, got.Retention)
	case got.Replicas != c.Replicas && !(got.Replicas == 0 && c.Replicas == 1):
		return fmt.Errorf("%w: stream %q has %d replicas, want %d", ErrStreamMismatch, c.Name, got.Replicas, c.Replicas)
	case got.Storage != c.Storage:
		return fmt.Errorf("%w: stream %q has %v storage, want %v", ErrStreamMismatch, c.Name, got.Storage, c.Storage)
	case c.AtomicPublish && !got.AllowAtomicPublish:
		return fmt.Errorf("%w: stream %q does not allow atomic publish (needed by the per-record layout)", ErrStreamMismatch, c.Name)
	case c.AllowDirect && !got.AllowDirect:
		return fmt.Errorf("%w: stream %q does not allow direct get", ErrStreamMismatch, c.Name)
	}
	return nil
}
