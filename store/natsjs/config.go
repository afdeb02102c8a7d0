package natsjs

import (
	"fmt"
	"time"
)

// Layout says how records become stream messages (package layout has the
// bytes).
type Layout int

const (
	// LayoutNative (the default): one stream message per record, its data
	// the payload as sent, its key, event time, headers (in their order),
	// producer name and sequence ID in NATS headers a person can read
	// (layout.AppendNativeHeaders), on the subject PREFIX.<topic
	// tokens>.<producer>: any NATS consumer reads the records. On a stream
	// of one replica that allows batch publish (EnsureStream's do), one
	// Append is written as one fast batch (ADR-50, nats-server 2.14 or
	// later), every message checked; else as atomic batches (2.12 or
	// later) of at most Config.MaxBatch messages.
	LayoutNative Layout = iota
	// LayoutPacked: the records of one Append in one message, split into
	// compare-and-set-chained messages when over the server's max_payload.
	// For raw ingest: only layout.DecodeMessage (and `inflight read`) reads
	// it. A replicated stream takes one compare-and-set per subject at a
	// time, so records per message is what scales.
	LayoutPacked
)

func (l Layout) String() string {
	switch l {
	case LayoutNative:
		return "native"
	case LayoutPacked:
		return "packed"
	}
	return fmt.Sprintf("Layout(%d)", int(l))
}

// ReadMode says where the store reads a subject's tail.
type ReadMode int

const (
	// ReadLeader (the default): the stream leader answers, so the tail is
	// current (the JetStream message-get API).
	ReadLeader ReadMode = iota
	// ReadDirect: any replica answers (direct get; the stream needs
	// AllowDirect), which spreads the load of many gateways but may return
	// a stale tail. That stays exact: a write on a stale tail fails its
	// compare-and-set, and the store then re-reads from the leader.
	ReadDirect
)

// Config configures a Store. The zero value of every field but Stream is a
// sensible default.
type Config struct {
	// Stream is the stream's name; it must capture Prefix + ".>".
	Stream string
	// Prefix is the first subject token, default "inflight". It may hold
	// dots ("a.b") but no wildcard and no empty token.
	Prefix string
	// Layout, default LayoutNative.
	Layout Layout
	// Read, default ReadLeader.
	Read ReadMode
	// Timeout bounds one publish or one read, default 5 s. Keep it well
	// under the producers' SendTimeout: a write that times out fails the
	// Append and the producer resends through a new session.
	Timeout time.Duration
	// MaxRecords caps the records of one packed message (0: as many as
	// fit in max_payload).
	MaxRecords int
	// MaxBatch caps the records of one atomic batch in LayoutNative,
	// default 999 (the server's default limit, max_batch_size, is 1000
	// messages; a batch of one record takes a second message for its fence
	// check).
	MaxBatch int
	// MaxConflicts is how many failed compare-and-sets in a row one Append
	// takes before it fails with ErrTailMoving, default 16.
	MaxConflicts int

	// noFast (tests): atomic batches even on a stream where fast ones
	// would do.
	noFast bool
}

func (c *Config) setDefaults() error {
	if err := checkNames(c.Stream, &c.Prefix); err != nil {
		return err
	}
	if c.Layout != LayoutNative && c.Layout != LayoutPacked {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, c.Layout)
	}
	if c.Read != ReadLeader && c.Read != ReadDirect {
		return fmt.Errorf("%w: ReadMode(%d)", ErrInvalidConfig, int(c.Read))
	}
	switch {
	case c.Timeout < 0:
		return fmt.Errorf("%w: Timeout %v", ErrInvalidConfig, c.Timeout)
	case c.Timeout == 0:
		c.Timeout = 5 * time.Second
	}
	if c.MaxRecords < 0 {
		return fmt.Errorf("%w: MaxRecords %d", ErrInvalidConfig, c.MaxRecords)
	}
	switch {
	case c.MaxBatch < 0:
		return fmt.Errorf("%w: MaxBatch %d", ErrInvalidConfig, c.MaxBatch)
	case c.MaxBatch == 0:
		c.MaxBatch = 999
	}
	switch {
	case c.MaxConflicts < 0:
		return fmt.Errorf("%w: MaxConflicts %d", ErrInvalidConfig, c.MaxConflicts)
	case c.MaxConflicts == 0:
		c.MaxConflicts = 16
	}
	return nil
}

// checkNames checks a stream name and a subject prefix, and fills in the
// default prefix, "inflight", when it is empty. Config and StreamConfig
// both name a stream this way.
func checkNames(stream string, prefix *string) error {
	if stream == "" || !validStreamName(stream) {
		return fmt.Errorf("%w: stream name %q", ErrInvalidConfig, stream)
	}
	if *prefix == "" {
		*prefix = "inflight"
	}
	if !validPrefix(*prefix) {
		return fmt.Errorf("%w: subject prefix %q", ErrInvalidConfig, *prefix)
	}
	return nil
}

// validStreamName: JetStream refuses names with spaces, '.', '*', '>' and
// path separators.
func validStreamName(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c <= ' ', c == '.', c == '*', c == '>', c == '/', c == '\\', c == 0x7f:
			return false
		}
	}
	return len(s) <= 255
}

// validPrefix: literal subject tokens, none empty.
func validPrefix(p string) bool {
	tok := 0
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '.':
			if tok == 0 {
				return false
			}
			tok = 0
		case c <= ' ', c == '*', c == '>', c == 0x7f:
			return false
		default:
			tok++
		}
	}
	return tok > 0
}
