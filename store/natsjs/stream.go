package natsjs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// StreamConfig describes the stream EnsureStream creates or checks.
type StreamConfig struct {
	// Name and Prefix as in Config (Prefix default "inflight"); the stream
	// captures Prefix + ".>" (the records) and "_INFLIGHT." + Prefix + ".>"
	// (the producer names' fences, where consumers of the records do not
	// look).
	Name   string
	Prefix string
	// Replicas, default 1; 3 survives the loss of one server.
	Replicas int
	// Storage, default jetstream.FileStorage.
	Storage jetstream.StorageType
	// MaxAge bounds how long a message is kept (0: forever). It must
	// outlive the longest time a producer may be away with messages
	// pending: once its subject ages out, State's LastSeq falls back to 0 and its
	// resent records would be stored again.
	MaxAge time.Duration
	// MaxBytes bounds the stream's size (0: no limit). Old messages are
	// discarded first, with the same caveat as MaxAge.
	MaxBytes int64
	// AllowDirect lets any replica answer reads (for ReadDirect).
	AllowDirect bool
}

// EnsureStream creates the stream if it does not exist, or checks that the
// existing one fits: it captures Prefix + ".>" and "_INFLIGHT." + Prefix +
// ".>", keeps messages by limits (not work-queue or interest retention,
// which delete what State needs), has the replicas and storage asked for,
// and allows atomic publish (nats-server 2.12 or later) and rollups (which
// keep one check mark per producer name). A stream that does not fit yields ErrStreamMismatch; EnsureStream
// never changes an existing stream.
//
// An error the server gives for good (its subjects overlap another
// stream's, JetStream is not enabled, a limit of the account) is returned
// at once with the server's description, as a *jetstream.APIError. Errors
// that go away by themselves are retried until ctx ends: no answer in time,
// no responders, a connection being re-established, and right after a
// cluster forms or loses a server, no meta leader yet ("JetStream system
// temporarily unavailable") or no suitable peers for placement. When ctx
// ends first, the error wraps ctx's and the last one seen.
func EnsureStream(ctx context.Context, js jetstream.JetStream, c StreamConfig) (jetstream.Stream, error) {
	if err := c.setDefaults(); err != nil {
		return nil, err
	}
	want := jetstream.StreamConfig{
		Name:               c.Name,
		Subjects:           []string{c.Prefix + ".>", fenceSpace(c.Prefix)},
		Retention:          jetstream.LimitsPolicy,
		Storage:            c.Storage,
		Replicas:           c.Replicas,
		MaxAge:             c.MaxAge,
		MaxBytes:           c.MaxBytes,
		AllowDirect:        c.AllowDirect,
		AllowAtomicPublish: true,
		AllowBatchPublish:  true,
		AllowRollup:        true,
		Discard:            jetstream.DiscardOld,
	}
	if c.MaxBytes == 0 {
		want.MaxBytes = -1
	}
	var s jetstream.Stream
	err := retryTransient(ctx, func(ctx context.Context) error {
		var err error
		s, err = js.Stream(ctx, c.Name)
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			return err
		}
		s, err = js.CreateStream(ctx, want)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			// Created meanwhile by another gateway: check that one.
			s, err = js.Stream(ctx, c.Name)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("inflight: natsjs: stream %q: %w%s", c.Name, err, hint(err, c.Prefix))
	}
	return s, checkStream(s.CachedInfo().Config, c)
}

// lookupStream returns the stream name, retrying errors that go away by
// themselves as EnsureStream does.
func lookupStream(ctx context.Context, js jetstream.JetStream, name string) (jetstream.Stream, error) {
	var s jetstream.Stream
	err := retryTransient(ctx, func(ctx context.Context) error {
		var err error
		s, err = js.Stream(ctx, name)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("inflight: natsjs: stream %q: %w", name, err)
	}
	return s, nil
}

// attemptTimeout bounds one request of retryTransient: a server that does
// not answer (a cluster without a leader) is asked again rather than waited
// on until ctx ends.
const attemptTimeout = 5 * time.Second

// retryTransient calls f until it returns nil or an error that is not
// transient, waiting a little between attempts; each attempt has at most
// attemptTimeout. When ctx ends first, the error wraps ctx's and the last
// error seen.
func retryTransient(ctx context.Context, f func(ctx context.Context) error) error {
	wait := 50 * time.Millisecond
	for {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		err := f(actx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w, after retrying: %w", ctx.Err(), err)
		}
		if !transient(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w, after retrying: %w", ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// JetStream API error codes that go away by themselves (nats-server's
// errors.json): a cluster between leaders or still placing its peers.
const (
	codeClusterIncomplete  = 10004 // JSClusterIncompleteErr: incomplete results
	codeClusterNoPeers     = 10005 // JSClusterNoPeersErrF: no suitable peers for placement
	codeClusterUnavailable = 10008 // JSClusterNotAvailErr: JetStream system temporarily unavailable
	codeClusterNotLeader   = 10009 // JSClusterNotLeaderErr: JetStream cluster can not handle request
	codeStreamOffline      = 10118 // JSStreamOfflineErr: stream is offline
	codeSubjectOverlap     = 10065 // JSStreamSubjectOverlapErr (for good: see hint)
)

// transient reports whether err may go away without anyone changing a
// configuration: an attempt that timed out, no responders (a server
// starting, or one without its JetStream API yet), a connection being
// re-established, and the cluster errors above. Everything else the server
// says is for good.
func transient(err error) bool {
	var api *jetstream.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode {
		case codeClusterIncomplete, codeClusterNoPeers, codeClusterUnavailable, codeClusterNotLeader, codeStreamOffline:
			return true
		}
		return false
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, nats.ErrDisconnected)
}

// hint says what to do about an error for good that a newcomer may not
// read from the server's words.
func hint(err error, prefix string) string {
	var api *jetstream.APIError
	if errors.As(err, &api) && api.ErrorCode == codeSubjectOverlap {
		return fmt.Sprintf(" (another stream already captures subjects under %q: use that stream, or give this one another subject prefix: StreamConfig.Prefix, prefix=P in a store URL)", prefix+".>")
	}
	return ""
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
	if err := checkWritable(got, c.Name, c.Prefix); err != nil {
		return err
	}
	switch {
	case got.Replicas != c.Replicas && !(got.Replicas == 0 && c.Replicas == 1):
		return fmt.Errorf("%w: stream %q has %d replicas, want %d", ErrStreamMismatch, c.Name, got.Replicas, c.Replicas)
	case got.Storage != c.Storage:
		return fmt.Errorf("%w: stream %q has %v storage, want %v", ErrStreamMismatch, c.Name, got.Storage, c.Storage)
	case c.AllowDirect && !got.AllowDirect:
		return fmt.Errorf("%w: stream %q does not allow direct get", ErrStreamMismatch, c.Name)
	}
	return nil
}

// checkWritable says why a Store cannot write a stream of this
// configuration under prefix. A stream made before the native layout (it
// captures only prefix.>, and the per-record layout's needed atomic
// publish only) stays readable; to write it, add the fence subjects and
// allow atomic publish and rollups, e.g.
//
//	nats stream edit STREAM --subjects 'inflight.>' --subjects '_INFLIGHT.inflight.>' \
//	    --allow-batch --allow-rollup
func checkWritable(got jetstream.StreamConfig, name, prefix string) error {
	all, fences := prefix+".>", fenceSpace(prefix)
	captures := func(subj string) bool {
		return slices.Contains(got.Subjects, subj) || slices.Contains(got.Subjects, ">")
	}
	switch {
	case !captures(all):
		return fmt.Errorf("%w: stream %q captures %q, not %q", ErrStreamMismatch, name, got.Subjects, all)
	case !captures(fences):
		return fmt.Errorf("%w: stream %q captures %q, not the fences' %q (a stream made before the native layout: add that subject, see docs/jetstream.md)", ErrStreamMismatch, name, got.Subjects, fences)
	case got.Retention != jetstream.LimitsPolicy:
		return fmt.Errorf("%w: stream %q has retention %v; the store needs limits retention", ErrStreamMismatch, name, got.Retention)
	case !got.AllowAtomicPublish:
		return fmt.Errorf("%w: stream %q does not allow atomic publish (every write is an atomic batch)", ErrStreamMismatch, name)
	case !got.AllowRollup || got.DenyPurge:
		return fmt.Errorf("%w: stream %q does not allow rollups (they keep one check mark per producer name)", ErrStreamMismatch, name)
	}
	return nil
}
