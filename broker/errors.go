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
	// ErrStore is returned by Session.Handle when the Store failed for the
	// session (its HELLO's Fence or State, a store failed for good); it
	// wraps the store's error. The session has sent an ERROR frame; the
	// transport must close the connection. Nothing of the failed batch was
	// acknowledged. A store error of one topic's Append or State ends that
	// topic alone with a TOPIC_ERROR whose text wraps it the same way.
	ErrStore = errors.New("inflight/broker: store failed")
	// ErrUnauthorized is returned by Session.Handle for a HELLO the broker
	// refused: its credentials were not accepted (Authenticate), its
	// identity may not use its producer name on any topic (Authorize), or
	// a live session of another identity holds that name. The session has
	// sent an ERROR frame of code wire.CodeUnauthorized; the transport must
	// close the connection.
	ErrUnauthorized = errors.New("inflight/broker: unauthorized")
	// ErrFenced is returned by Session.Handle for a HELLO whose epoch is
	// below the name's stored epoch, and for a session whose name a newer
	// incarnation took over (on this broker, or through the Store from
	// another one). The session has sent an ERROR frame of code
	// wire.CodeFenced; the transport must close the connection. A Store
	// wraps it in the errors of Fence and Append when a newer epoch is
	// stored.
	ErrFenced = errors.New("inflight/broker: fenced")
	// ErrNameInUse is returned by Session.Handle for a HELLO with
	// wire.Hello.Yield that asked for a new epoch while a live session of
	// this broker holds the name. The session has sent an ERROR frame of
	// code wire.CodeNameInUse; the transport must close the connection.
	ErrNameInUse = errors.New("inflight/broker: name in use")
	// ErrACL is returned by ParseACL and LoadACL, wrapped with the line and
	// the reason, for an access list they cannot read.
	ErrACL = errors.New("inflight/broker: bad access list")
	// ErrBusy is returned by Session.Handle for a BATCH that found the
	// broker's frame memory (MaxBufferedBytes) taken by other sessions'
	// frames for too long. The session has sent an ERROR frame of code
	// wire.CodeInternal; the transport must close the connection; the
	// producer reconnects and resends.
	ErrBusy = errors.New("inflight/broker: busy")
	// ErrSessionClosed is returned by Session.Handle after Session.Close.
	ErrSessionClosed = errors.New("inflight/broker: session closed")
	// ErrStoreClosed is wrapped by a Store's errors after its Close (the
	// file store's State, Fence, Append and Scan). The broker reports it to
	// producers with the ERROR code wire.CodeStoreUnavailable.
	ErrStoreClosed = errors.New("inflight/broker: store closed")
	// ErrStoreFailed is wrapped by a Store's errors when it failed for good
	// (the file store after a failed write or fsync: a full disk, an I/O
	// error; the state of the file is unknown, and it refuses every later
	// State, Fence and Append until it is reopened). The broker reports it to
	// producers with the ERROR code wire.CodeStoreUnavailable.
	ErrStoreFailed = errors.New("inflight/broker: store failed for good (reopen it)")
)
