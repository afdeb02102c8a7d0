// Package transport defines what inflight needs from a connection to a
// broker, and nothing more: something that writes frames, something that
// delivers the frames coming back, and a way to dial.
//
// A transport never owns a message. It carries encoded frames (see package
// wire) and may vanish at any instant; the producer keeps every message in
// its ring until the broker's receipt or the message's deadline resolves it,
// and resends from the ring on the next connection. Implementations:
// transport/mem (in process, with fault injection), transport/tcp (gnet)
// and transport/stdnet (net and crypto/tls).
package transport

import (
	"context"
	"errors"

	"github.com/inflightmq/inflight/wire"
)

// ErrClosed is returned by Conn.WriteFrame after the connection closed, by
// either side.
var ErrClosed = errors.New("inflight/transport: connection closed")

// Dialer opens connections to one broker.
type Dialer interface {
	// Dial connects and returns a Conn whose inbound frames and close event
	// go to h. It honours ctx's deadline and cancellation. Dial is safe for
	// concurrent use. h.OnClose may run before Dial returns (the peer hung
	// up at once); h.OnFrame does not, as long as nothing was written.
	Dial(ctx context.Context, h Handler) (Conn, error)
}

// Conn is one connection. Its methods are safe for concurrent use.
type Conn interface {
	// WriteFrame queues one complete frame (length prefix included) for
	// sending. Frames are sent whole, in the order of the WriteFrame calls
	// (for calls from different goroutines, in the order they happen). It
	// does not wait for the peer. The transport owns buf.Bytes until it calls buf.Release,
	// which it does exactly once after the bytes are no longer needed, or
	// never if the connection dies first: the caller must not rely on the
	// release to make progress after a close. WriteFrame returns ErrClosed
	// (possibly wrapped) once the connection is closed; the frame is then
	// not sent.
	WriteFrame(buf *Buffer) error
	// Close closes the connection. It is idempotent, safe from any
	// goroutine, and makes the Handler's OnClose run once, if it has not.
	Close() error
}

// FramesWriter is a Conn that writes several frames at once, with as few
// system calls as it can (tcp: one vectored write on Linux, a write per
// frame elsewhere; stdnet: through its writer's 64 KiB buffer). The
// producer hands such a Conn every frame of one pass over its topics in
// one call, and lets more frames be in flight on it than on a Conn that
// takes frames one by one (see core.MaxFramesInFlight).
type FramesWriter interface {
	Conn
	// WriteFrames is WriteFrame of each of bufs in turn, in one call: the
	// frames are sent whole and in order, after those of earlier calls,
	// and each buffer is released as WriteFrame's is. It does not keep
	// bufs (the slice) after it returns. On an error (ErrClosed, possibly
	// wrapped) the connection is closed or closing: the frames before the
	// one that could not be written may reach the peer, that one and the
	// later ones not whole.
	WriteFrames(bufs []*Buffer) error
}

// Splicer is a FramesWriter that writes frames with splices (see
// Buffer.Splices) from the memory they refer to, without copying it into
// buffers of its own while it can write it. The producer hands such frames
// only to a Conn that is a Splicer and whose Splicing reported true. It
// gives a message's payload back to its caller (a failure's callback, a
// failed Send returning) only once no connection reads it: the current
// one after a Detach that followed the frame's hand-over, earlier ones
// once their Close returned. WriteFrames must not wait for the network:
// a failure's callback waits for the producer's pass, which includes it.
// A success needs neither: it is the broker's
// receipt, which follows the broker's read of the frame, so the
// connection wrote it (the protocol's promise: a broker acknowledges only
// what it received).
type Splicer interface {
	FramesWriter
	// Splicing reports whether the connection takes frames with splices,
	// the same answer for the life of the connection (tcp: true on
	// Linux).
	Splicing() bool
	// Detach makes the connection stop reading the memory of the splices
	// of frames handed to it: what it has not written of them yet it
	// copies into memory of its own, and it returns once no write reads a
	// splice any more. It copies every such frame the connection holds,
	// and waits only for a write in progress, never for the network. A
	// connection that Close returned from reads no splice either. Safe
	// for concurrent use, from any goroutine.
	Detach()
}

// Handler receives what a connection delivers. Its methods are called from a
// goroutine owned by the transport (possibly its event loop), one call at a
// time per connection, so they must be fast and must not block; they must not
// call back into the connection's WriteFrame.
type Handler interface {
	// OnFrame is called with each complete inbound frame, in order. frame
	// is valid only during the call.
	OnFrame(frame []byte)
	// OnClose is called once, after the last OnFrame, when the connection
	// closes for any reason; err says why (nil for a local Close).
	OnClose(err error)
}

// Buffer is an outbound frame and the hook that returns it to its owner.
// The owner sets Bytes, Splices (for a Splicer) and Owner; the transport
// calls Release when done.
type Buffer struct {
	Bytes []byte
	// Splices, when set, are parts of the frame that live outside Bytes
	// (payloads the frame refers to rather than copies, see
	// wire.BatchBuilder.AddRef): the frame is Bytes with each splice's
	// Data inserted at its At (wire.AppendFlat). Only a Splicer is handed
	// such a Buffer. Release clears them.
	Splices []wire.Splice
	// Owner receives the buffer on Release. It must have room (Release
	// never blocks: if Owner is full or nil the buffer is dropped for the
	// garbage collector).
	Owner chan<- *Buffer
}

// Release hands b back to its owner. Transports call it at most once per
// buffer handed to them, from any goroutine: once per buffer of a
// WriteFrame or WriteFrames that returned nil (unless the connection dies
// first), and for the buffers a failed WriteFrames had written whole before
// the failure, maybe.
func (b *Buffer) Release() {
	if len(b.Splices) > 0 { // the payloads are their owners' again: no reference kept
		clear(b.Splices)
		b.Splices = b.Splices[:0]
	}
	if b.Owner == nil {
		return
	}
	select {
	case b.Owner <- b:
	default:
	}
}

// Len returns the frame's size: its Bytes and its splices.
func (b *Buffer) Len() int {
	n := len(b.Bytes)
	for _, s := range b.Splices {
		n += len(s.Data)
	}
	return n
}

// Flatten copies the frame's splices into Bytes, which then holds the
// whole frame, and drops them: for a writer that must keep or copy the
// frame's bytes. It allocates a new Bytes when the frame has splices.
func (b *Buffer) Flatten() {
	if len(b.Splices) == 0 {
		return
	}
	b.Bytes = wire.AppendFlat(make([]byte, 0, b.Len()), b.Bytes, b.Splices)
	clear(b.Splices)
	b.Splices = b.Splices[:0]
}
