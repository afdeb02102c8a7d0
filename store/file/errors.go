package file

import "errors"

// A Store's errors. After a failed write or fsync, and after Close, a
// Store's errors wrap the broker's: broker.ErrStoreFailed and
// broker.ErrStoreClosed, which the broker reports to producers as the
// ERROR code wire.CodeStoreUnavailable.
var (
	// ErrInvalidOption is returned by Open, CheckOptions and
	// ParseFsyncPolicy for an option out of range, wrapped with its name.
	ErrInvalidOption = errors.New("inflight/file: invalid option")
	// ErrCorrupt is returned, wrapped with detail, by Open for a segment
	// that is not a store segment (wrong magic or a version this inflight
	// does not read; it is left untouched); for damage to the active
	// segment that is not a torn tail, that is an unreadable region with
	// an intact entry after it (a *CorruptError says where; the file is
	// left untouched unless the Repair option is given); for an active
	// segment that lost its snapshot while sealed segments exist, or is
	// missing beside them. Scan and Verify return it for an entry of any
	// segment that does not check out (a *CorruptError naming the
	// segment). Not errors, because a crash leaves them and nothing there
	// was acknowledged: a torn tail (unreadable to the end, no intact entry
	// after it), cut and reported in Recovery.TruncatedBytes; a page of
	// zeros before an intact entry, moved to a side file
	// (Recovery.SideFile); a creation cut short (part of a header, or a
	// header's worth of zeros), taken as a new store; a hole in the sealed
	// segments, an interrupted retention, finished (Recovery.Removed).
	ErrCorrupt = errors.New("inflight/file: store file corrupt")
	// ErrLocked is returned by Open when another Store, in this process or
	// another, has the file open for writing.
	ErrLocked = errors.New("inflight/file: store file locked by another process (is another broker running on it?)")
	// ErrReadOnly is returned by Append on a Store opened with ReadOnly.
	ErrReadOnly = errors.New("inflight/file: store opened read-only")
)
