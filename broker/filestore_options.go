package broker

import (
	"fmt"
	"strconv"
	"time"
)

// FsyncPolicy says when FileStore makes appended records durable.
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

// FileStoreOption configures a FileStore.
type FileStoreOption interface{ applyFile(*fileConfig) error }

type fileConfig struct {
	policy   FsyncPolicy
	every    time.Duration
	repair   bool
	readOnly bool
	wrap     func(storeFile) storeFile // tests: fault injection
}

type fileOptionFunc func(*fileConfig) error

func (f fileOptionFunc) applyFile(c *fileConfig) error { return f(c) }

// Fsync sets when appended records are fsynced (default FsyncBatch).
func Fsync(p FsyncPolicy) FileStoreOption {
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
func FsyncEvery(d time.Duration) FileStoreOption {
	return fileOptionFunc(func(c *fileConfig) error {
		if d <= 0 {
			return fmt.Errorf("%w: FsyncEvery %v, want > 0", ErrInvalidOption, d)
		}
		c.every = d
		return nil
	})
}

// Repair lets OpenFileStore open a corrupt file (see CorruptError): it
// moves everything from the first damaged entry to the end into a side
// file next to the store (PATH.corrupt-OFFSET), fsyncs that, and only then
// cuts the store file there. The records in the side file are no longer in
// the store: a producer whose acknowledged records were among them learns a
// lower last sequence ID at its next HELLO. Default off: a corrupt file is
// refused with a *CorruptError and left untouched. Ignored with ReadOnly.
func Repair() FileStoreOption {
	return fileOptionFunc(func(c *fileConfig) error { c.repair = true; return nil })
}

// ReadOnly opens the store for reading while a broker may be writing it:
// no lock, nothing written (a torn tail is left as it is and not read, a
// version 1 file is not upgraded), Append returns ErrReadOnly. Scan sees
// the entries that were complete when the store was opened. The file must
// exist.
func ReadOnly() FileStoreOption {
	return fileOptionFunc(func(c *fileConfig) error { c.readOnly = true; return nil })
}

// Recovery says what OpenFileStore found in an existing file.
type Recovery struct {
	Entries        int    // complete entries replayed
	Records        int    // records in them
	TruncatedBytes int64  // bytes cut from the end: an incomplete final entry left by a crash (0 for a clean file)
	UpgradedFrom   int    // the file's format version if Open upgraded it (1), else 0
	RepairedBytes  int64  // with Repair: bytes moved from a corrupt file to SideFile
	SideFile       string // with Repair: where they are ("" if the file was not corrupt)
}
