package broker

import "errors"

var (
	// ErrInvalidOption is returned by New for an option value out of range,
	// wrapped with the option's name.
	ErrInvalidOption = errors.New("inflight/broker: invalid option")
	// ErrProtocol is returned by Session.Handle when the peer broke the
	// protocol (a frame out of order, of a type a producer must not send, or
	// malformed). It wraps the wire error when there is one. The session has
	// sent an ERROR frame; the transport must close the connection.
	ErrProtocol = errors.New("inflight/broker: protocol violation")
	// ErrReplaced is returned by Session.Handle when another session took
	// over this session's producer name. The transport must close the
	// connection.
	ErrReplaced = errors.New("inflight/broker: producer taken over by another session")
	// ErrStore is returned by Session.Handle when the Store failed; it wraps
	// the store's error. The session has sent an ERROR frame; the transport
	// must close the connection. Nothing of the failed batch was acknowledged.
	ErrStore = errors.New("inflight/broker: store failed")
	// ErrUnauthorized is returned by Session.Handle for a HELLO the broker
	// refused: its credentials were not accepted (Authenticate), its
	// identity may not write its topic as its producer name (Authorize), or
	// a live session of another identity holds that name. The session has
	// sent an ERROR frame of code wire.CodeUnauthorized; the transport must
	// close the connection.
	ErrUnauthorized = errors.New("inflight/broker: unauthorized")
	// ErrACL is returned by ParseACL and LoadACL, wrapped with the line and
	// the reason, for an access list they cannot read.
	ErrACL = errors.New("inflight/broker: bad access list")
	// ErrSessionClosed is returned by Session.Handle after Session.Close.
	ErrSessionClosed = errors.New("inflight/broker: session closed")
	// ErrStoreClosed is returned by FileStore's Append, LastSeq and Scan
	// after Close.
	ErrStoreClosed = errors.New("inflight/broker: store closed")
	// ErrCorrupt is returned, wrapped with detail, by OpenFileStore for a
	// segment that is not a FileStore segment (wrong magic or version; it is
	// left untouched), for an active segment damaged anywhere but in an
	// incomplete final entry (a *CorruptError says where; the file is left
	// untouched unless the Repair option is given), and for a store whose
	// sealed segments have a hole or whose active segment is missing; and by
	// Scan and Verify when an entry of any segment does not check out (a
	// *CorruptError naming the segment). An incomplete final entry (a torn
	// write) is not an error: it is cut and reported in
	// Recovery.TruncatedBytes.
	ErrCorrupt = errors.New("inflight/broker: store file corrupt")
	// ErrLocked is returned by OpenFileStore when another FileStore, in this
	// process or another, has the file open for writing.
	ErrLocked = errors.New("inflight/broker: store file locked by another process (is another broker running on it?)")
	// ErrStoreFailed is wrapped by FileStore's errors after a write or fsync
	// failed (a full disk, an I/O error): the state of the file is unknown,
	// and the store refuses every later Append and LastSeq until it is
	// reopened. The broker reports it to producers with the ERROR code
	// wire.CodeStoreUnavailable.
	ErrStoreFailed = errors.New("inflight/broker: store failed for good (reopen it)")
	// ErrReadOnly is returned by Append on a FileStore opened with ReadOnly.
	ErrReadOnly = errors.New("inflight/broker: store opened read-only")
)
