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
	// that is not a store segment (wrong magic or version; it is left
	// untouched), for an active segment damaged anywhere but in an
	// incomplete final entry (a *CorruptError says where; the file is left
	// untouched unless the Repair option is given), and for a store whose
	// sealed segments have a hole or whose active segment is missing; and by
	// Scan and Verify when an entry of any segment does not check out (a
	// *CorruptError naming the segment). An incomplete final entry (a torn
	// write) is not an error: it is cut and reported in
	// Recovery.TruncatedBytes.
	ErrCorrupt = errors.New("inflight/file: store file corrupt")
	// ErrLocked is returned by Open when another Store, in this process or
	// another, has the file open for writing.
	ErrLocked = errors.New("inflight/file: store file locked by another process (is another broker running on it?)")
	// ErrReadOnly is returned by Append on a Store opened with ReadOnly.
	ErrReadOnly = errors.New("inflight/file: store opened read-only")
)
