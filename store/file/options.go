package file

import (
	"fmt"
	"strconv"
	"time"
)

// FsyncPolicy says when Store makes appended records durable.
type FsyncPolicy int

const (
	// FsyncNone relies on the OS page cache: a machine crash may lose
	// acknowledged records (a process crash does not).
	FsyncNone FsyncPolicy = iota
	// FsyncBatch fsyncs before Append returns: an acknowledged record
	// survives a machine crash. Concurrent Appends share one fsync.
	FsyncBatch
	// FsyncInterval fsyncs every interval in the background: a machine crash
	// may lose up to one interval of acknowledged records.
	FsyncInterval
)

// String returns "none", "batch" or "interval".
func (p FsyncPolicy) String() string {
	switch p {
	case FsyncNone:
		return "none"
	case FsyncBatch:
		return "batch"
	case FsyncInterval:
		return "interval"
	}
	return "FsyncPolicy(" + strconv.Itoa(int(p)) + ")"
}

// ParseFsyncPolicy is the inverse of FsyncPolicy.String. Any other string
// (matching is exact) yields an error wrapping ErrInvalidOption.
func ParseFsyncPolicy(s string) (FsyncPolicy, error) {
	for p := FsyncNone; p <= FsyncInterval; p++ {
		if s == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("%w: fsync policy %q, want none, batch or interval", ErrInvalidOption, s)
}

// Option configures a Store.
type Option interface{ applyFile(*fileConfig) error }

type fileConfig struct {
	policy       FsyncPolicy
	every        time.Duration
	repair       bool
	readOnly     bool
	readDamaged  bool
	segmentBytes int64
	retainAge    time.Duration
	retainBytes  int64
	forgetAfter  time.Duration
	now          func() time.Time          // tests: the clock of rolls and retention
	wrap         func(storeFile) storeFile // tests: fault injection
	fs           fileSystem                // tests: a recording file system; default the OS
}

// defaultSegmentBytes is SegmentBytes' default: a restart replays at most
// this much (about 1 M records of 100 bytes, some 50 ms).
const defaultSegmentBytes = 128 << 20

// minSegmentBytes is the smallest SegmentBytes: a segment holds at least
// its header, its snapshot and one entry whatever the setting.
const minSegmentBytes = 4 << 10

// SegmentBytes sets the size at which the active segment rolls (default
// 128 MiB, at least 4 KiB): an Append that would take it past n seals it
// and starts a new one (see Store). Opening the store replays one
// segment, so n bounds the restart cost; each roll costs two fsyncs of the
// directory and one of each segment.
func SegmentBytes(n int64) Option {
	return atLeast("SegmentBytes", n, minSegmentBytes, func(c *fileConfig) *int64 { return &c.segmentBytes })
}

// RetainAge removes a sealed segment once its last entry was written longer
// than d ago (its file's modification time: a store copied without the
// times ages from the copy; default 0: kept forever). The records in
// it are gone; every producer's last sequence ID stays in the snapshots, so
// a resend of an old record is still recognized. The check runs at open,
// at each roll, and every d/10 (within 10ms and 1 minute) in the store's
// maintenance goroutine. The active segment is never removed: with little
// traffic, records may outlive d until the segment fills.
func RetainAge(d time.Duration) Option {
	return atLeast("RetainAge", d, 0, func(c *fileConfig) *time.Duration { return &c.retainAge })
}

// ForgetProducersAfter drops what the store knows of a producer name (its
// epoch and every topic's last sequence ID) that has not fenced or
// appended for d and has no live session (the broker pins those, see
// Pin) (default 0: never), so that a broker whose producers come and go
// (the default producer name is random per process) does not keep, in
// memory and in every snapshot, state for each producer it ever saw. The
// check runs at each roll. Forgetting never re-issues an epoch: the roll
// reserves one above every epoch ever given (the store's floor, kept in
// its snapshots); a forgotten incarnation that reconnects is below it and
// refused as fenced (broker.ErrFenced, which its producer reports as
// core.ErrFenced), never taken for the newest, so it neither reports
// records lost nor stores its records again; a new instance of the name
// starts afresh (sequence IDs from 1, an epoch above the floor). So d must
// be above the longest a producer instance stays disconnected.
func ForgetProducersAfter(d time.Duration) Option {
	return atLeast("ForgetProducersAfter", d, 0, func(c *fileConfig) *time.Duration { return &c.forgetAfter })
}

// RetainBytes removes the oldest sealed segments while the store is larger
// than n bytes (default 0: no limit), at open and at each roll. The active
// segment is never removed, so the store may exceed n by up to one segment.
func RetainBytes(n int64) Option {
	return atLeast("RetainBytes", n, 0, func(c *fileConfig) *int64 { return &c.retainBytes })
}

// atLeast is an option that sets the field of fileConfig that field points
// to to v, refusing a v below least with an error that names the option.
func atLeast[T int64 | time.Duration](name string, v, least T, field func(*fileConfig) *T) Option {
	return fileOptionFunc(func(c *fileConfig) error {
		if v < least {
			return fmt.Errorf("%w: %s %v, want >= %v", ErrInvalidOption, name, v, least)
		}
		*field(c) = v
		return nil
	})
}

// fileOptions applies opts over the defaults.
func fileOptions(opts []Option) (fileConfig, error) {
	cfg := fileConfig{policy: FsyncBatch, every: 100 * time.Millisecond, segmentBytes: defaultSegmentBytes, now: time.Now, fs: osFS{}}
	for _, o := range opts {
		if o == nil {
			return cfg, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		if err := o.applyFile(&cfg); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// CheckOptions returns the error Open would return for
// opts (wrapping ErrInvalidOption), without touching any file: for a
// command that checks its flags before it starts.
func CheckOptions(opts ...Option) error {
	_, err := fileOptions(opts)
	return err
}

type fileOptionFunc func(*fileConfig) error

func (f fileOptionFunc) applyFile(c *fileConfig) error { return f(c) }

// Fsync sets when appended records are fsynced (default FsyncBatch).
func Fsync(p FsyncPolicy) Option {
	return fileOptionFunc(func(c *fileConfig) error {
		if p < FsyncNone || p > FsyncInterval {
			return fmt.Errorf("%w: Fsync %v", ErrInvalidOption, p)
		}
		c.policy = p
		return nil
	})
}

// FsyncEvery sets the interval of FsyncInterval (default 100ms, must be
// > 0). It is ignored under the other policies.
func FsyncEvery(d time.Duration) Option {
	return fileOptionFunc(func(c *fileConfig) error {
		if d <= 0 {
			return fmt.Errorf("%w: FsyncEvery %v, want > 0", ErrInvalidOption, d)
		}
		c.every = d
		return nil
	})
}

// Repair lets Open open a corrupt file (see CorruptError): it
// moves everything from the first damaged entry to the end into a side
// file next to the store (PATH.corrupt-OFFSET), fsyncs that, and only then
// cuts the store file there. The records in the side file are no longer in
// the store: a producer whose acknowledged records were among them learns a
// lower last sequence ID at its next HELLO. Default off: a corrupt file is
// refused with a *CorruptError and left untouched. Ignored with ReadOnly.
func Repair() Option {
	return fileOptionFunc(func(c *fileConfig) error { c.repair = true; return nil })
}

// ReadOnly opens the store for reading while a broker may be writing it:
// no lock, nothing written (a torn tail is left as it is and not read, a
// version 1 file is not upgraded, no retention), Append returns
// ErrReadOnly. Scan sees the entries that were complete when the store was
// opened (less the sealed segments retention removes meanwhile). The store
// must exist.
func ReadOnly() Option {
	return fileOptionFunc(func(c *fileConfig) error { c.readOnly = true; return nil })
}

// ReadDamaged lets Open, with ReadOnly, open a store whose active segment is
// damaged (see CorruptError), which it refuses otherwise: Scan then hands
// over every record before the damage and returns the *CorruptError there
// (ScanSkipDamaged reports it and ends normally: nothing follows the active
// segment). Nothing is written, as always with ReadOnly. For a reader that
// wants what can be read (inflight read); a broker opening such a store
// must repair it first (Repair). Ignored without ReadOnly.
func ReadDamaged() Option {
	return fileOptionFunc(func(c *fileConfig) error { c.readDamaged = true; return nil })
}

// Recovery says what Open found in an existing store.
type Recovery struct {
	Entries        int    // complete entries replayed: those of the active segment
	Records        int    // records in them
	Sealed         int    // sealed segments found beside it (not replayed)
	Removed        int    // sealed segments retention removed at open
	Forgotten      int    // producers ForgetProducersAfter dropped at open: always 0 now (it forgets at rolls only)
	TruncatedBytes int64  // bytes cut from the end: an incomplete final entry left by a crash (0 for a clean file)
	UpgradedFrom   int    // the active segment's format version if Open upgraded it (1, 2 or 3), else 0
	RepairedBytes  int64  // with Repair: bytes moved from a corrupt file to SideFile
	SideFile       string // with Repair: where they are ("" if the file was not corrupt)
}
