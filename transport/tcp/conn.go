package tcp

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/inflightmq/inflight/transport"
)

// clientConn is one producer connection. WriteFrame and Close may be called
// from any goroutine; the fields marked "loop" belong to the event loop.
//
// Writing: WriteFrame writes to the socket itself, a non-blocking write on
// its caller's goroutine, which costs the event loop nothing (no task, no
// wake-up, no switch of goroutines). What the socket does not take at once
// goes to gnet (AsyncWrite), and from then on every frame goes that way,
// behind it, until gnet's outbound buffer has drained: then the loop hands
// writing back (viaLoop false). mu orders the two ways and the close: a
// direct write happens under mu, and OnClose, which gnet runs before it
// closes the descriptor, takes mu and marks the connection closed, so no
// direct write ever reaches a closed (or reused) descriptor.
//
// A run of frames of handOffBytes or more goes to the connection's writer
// goroutine instead (see writer), and so does every frame after it while
// the writer holds any: the caller builds its next frames while the kernel
// copies these. At most one of the three ways holds bytes at a time, so the
// socket gets the frames in the order they were handed over: direct writes
// only while neither gnet nor the writer holds any, frames go to the writer
// only while gnet holds none, and to gnet only while the writer holds none.
type clientConn struct {
	d    *Dialer
	h    transport.Handler
	gc   gnet.Conn
	fd   int       // gc's descriptor, for direct writes
	once sync.Once // OnClose reaches h once

	mu     sync.Mutex
	opened bool  // gnet's loop registered the connection (OnOpen)
	closed bool  // no write may start
	reason error // the write error that closed it, if one did
	// viaLoop: frames go through gnet, behind bytes it holds. Set under
	// mu by WriteFrame, cleared under mu by the loop; while it is set the
	// connection holds the Dialer's parker (the loop has writing to do).
	viaLoop atomic.Bool
	queued  atomic.Int64 // AsyncWrites whose callback has not run
	// viaWriter: frames go to w, behind frames it holds. Under mu: set by
	// handOff, cleared by the writer once it has written all it took.
	viaWriter bool
	w         *writer // under mu: nil until the first hand-off (or where none runs)
	noWriter  bool    // under mu: the writer could not start; none is tried again
	toWriter  int64   // under mu: runs handed to the writer (for tests)

	gone bool // under the events' mu: OnClose ran, add must not list it

	iov []iovec // WriteFrames', under mu

	held   []heldBuffer // loop: handed to gnet, maybe not yet to the socket
	handed uint64       // loop: bytes handed to gnet so far
	left   int          // loop: bytes of an incomplete frame left in gnet's buffer
}

type heldBuffer struct {
	buf *transport.Buffer
	end uint64 // handed count once this buffer's bytes were handed
}

// WriteFrame implements transport.Conn. The frame is written straight from
// buf, by this goroutine while gnet holds nothing of the connection's (gnet
// copies only what the socket does not take at once), and buf is released
// once all its bytes have reached the socket.
func (c *clientConn) WriteFrame(buf *transport.Buffer) error {
	buf.Flatten() // splices go through WriteFrames (see Splicing)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return transport.ErrClosed
	}
	if one := [1]*transport.Buffer{buf}; c.handOff(one[:]) {
		c.mu.Unlock()
		return nil
	}
	rest := buf.Bytes
	if !c.viaLoop.Load() {
		var err error
		if rest, err = writeSome(c.fd, rest); err != nil {
			return c.failWrite(err)
		}
		if len(rest) == 0 {
			c.mu.Unlock()
			buf.Release()
			return nil
		}
		c.toLoop()
	}
	err := c.queue(buf, rest)
	c.mu.Unlock()
	return err
}

// WriteFrames implements transport.FramesWriter: the frames go to the
// socket in one vectored write (Linux; elsewhere one write each) while
// gnet holds nothing of the connection's, the rest through gnet as
// WriteFrame's do. Frames with splices (see Splicing) are written from
// the splices' memory, directly or by the writer; what of them goes to
// gnet is copied first.
func (c *clientConn) WriteFrames(bufs []*transport.Buffer) error {
	if len(bufs) == 0 {
		return nil
	}
	if !spliceWrites {
		for _, b := range bufs {
			b.Flatten()
		}
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return transport.ErrClosed
	}
	if c.handOff(bufs) {
		c.mu.Unlock()
		return nil
	}
	sent, off := 0, 0
	if !c.viaLoop.Load() {
		var err error
		if sent, off, err = writeAll(c.fd, &c.iov, bufs, 0); err != nil {
			release(bufs[:sent])
			return c.failWrite(err)
		}
		if sent < len(bufs) {
			c.toLoop()
		}
	}
	var err error
	for i := sent; i < len(bufs) && err == nil; i++ {
		if i > sent {
			off = 0
		}
		bufs[i].Flatten() // gnet keeps what it is handed: no splice may stay in it
		err = c.queue(bufs[i], bufs[i].Bytes[off:])
	}
	c.mu.Unlock()
	release(bufs[:sent])
	return err
}

// Splicing implements transport.Splicer: true on Linux, where frames with
// splices are written piece by piece (writev), directly or by the writer
// goroutine; what the socket does not take of a direct write goes to gnet
// copied. Elsewhere false: the producer then copies payloads into its
// frames.
func (c *clientConn) Splicing() bool { return spliceWrites }

// Detach implements transport.Splicer: the frames queued for the writer
// are copied whole now, and the writer, if it is writing, copies what is
// left of its own and answers; Detach waits for that answer, which comes
// within one write (the socket is non-blocking, and a writer waiting for
// room is woken to answer). Direct writes read splices under mu, which
// Detach takes, and gnet never holds any.
func (c *clientConn) Detach() {
	c.mu.Lock()
	w := c.w
	if w == nil {
		c.mu.Unlock()
		return
	}
	for _, b := range w.queue {
		b.Flatten()
	}
	answered := w.detach()
	c.mu.Unlock()
	if answered != nil {
		<-answered
	}
}

func release(bufs []*transport.Buffer) {
	for _, b := range bufs {
		b.Release()
	}
}

// handOff gives bufs to the writer if they go there (see clientConn),
// starting it for the first run that does. mu held, the connection open.
func (c *clientConn) handOff(bufs []*transport.Buffer) bool {
	if !c.viaWriter {
		if c.viaLoop.Load() || !largeRun(bufs) || !c.startWriter() {
			return false
		}
		c.viaWriter = true
	}
	c.w.queue = append(c.w.queue, bufs...)
	c.toWriter++
	c.w.kick()
	return true
}

// largeRun reports whether bufs hold handOffBytes or more.
func largeRun(bufs []*transport.Buffer) bool {
	n := 0
	for _, b := range bufs {
		if n += b.Len(); n >= handOffBytes {
			return true
		}
	}
	return false
}

// failWrite closes the connection after a write failed with err. mu held;
// it unlocks it.
func (c *clientConn) failWrite(err error) error {
	c.markClosed()
	c.reason = os.NewSyscallError("write", err)
	_ = c.closeOnLoop() // unlocks
	return fmt.Errorf("%w: %w", transport.ErrClosed, err)
}

// toLoop sends every frame through gnet from now on, until it drained
// (see releaseWritten). mu held.
func (c *clientConn) toLoop() {
	c.viaLoop.Store(true)
	c.d.park.hold()
}

// queue hands gnet rest, the bytes of buf not yet written, and releases
// buf once they left gnet's buffer. mu held, viaLoop set.
func (c *clientConn) queue(buf *transport.Buffer, rest []byte) error {
	n := uint64(len(rest))
	c.queued.Add(1)
	err := c.gc.AsyncWrite(rest, func(gc gnet.Conn, err error) error {
		c.queued.Add(-1)
		if err != nil {
			return nil // closed: the buffer is abandoned
		}
		c.handed += n
		c.held = append(c.held, heldBuffer{buf, c.handed})
		c.releaseWritten(gc)
		return nil
	})
	if err != nil {
		c.queued.Add(-1) // gnet refused it: its callback never runs
		return fmt.Errorf("%w: %w", transport.ErrClosed, err)
	}
	return nil
}

// releaseWritten releases the held buffers whose bytes have all left gnet's
// outbound buffer, and hands writing back to WriteFrame once gnet holds
// nothing more of the connection's. Loop only.
func (c *clientConn) releaseWritten(gc gnet.Conn) {
	written := c.handed - uint64(gc.OutboundBuffered())
	i := 0
	for ; i < len(c.held) && c.held[i].end <= written; i++ {
		c.held[i].buf.Release()
		c.held[i] = heldBuffer{}
	}
	if i > 0 {
		c.held = append(c.held[:0], c.held[i:]...)
	}
	if len(c.held) > 0 || !c.viaLoop.Load() || c.queued.Load() != 0 || gc.OutboundBuffered() != 0 {
		return
	}
	c.mu.Lock()
	// Only WriteFrame and WriteFrames queue, under mu: nothing is queued
	// now, and nothing will be before the next direct write.
	back := c.queued.Load() == 0 && c.viaLoop.Swap(false)
	c.mu.Unlock()
	if back {
		c.d.park.release(func() gnet.Conn { return gc })
	}
}

// Close implements transport.Conn. It returns once the writer goroutine,
// if one runs, has stopped (within one write: see writer.halt), so that
// nothing reads a frame's splices after it.
func (c *clientConn) Close() error {
	c.mu.Lock()
	w := c.w
	var err error
	if c.closed {
		c.mu.Unlock()
	} else {
		c.markClosed()
		err = c.closeOnLoop() // unlocks
	}
	w.wait()
	return err
}

// closeOnLoop has the event loop close the connection, and holds the
// parker until it has. mu held, by the caller that marked c closed; it
// unlocks mu after it queued the close. Queued under mu, the close reaches
// a running loop: gnet's Stop runs every connection's OnClose, which takes
// mu, before it closes the loop's descriptors, and a task queued after that
// would be signalled through a closed (or reused) descriptor.
func (c *clientConn) closeOnLoop() error {
	c.d.park.hold()
	err := c.gc.CloseWithCallback(func(gnet.Conn, error) error {
		c.d.park.release(c.d.events.any)
		return nil
	})
	c.mu.Unlock()
	if err != nil {
		c.d.park.release(c.d.events.any) // takes the events' mu: not under c.mu
	}
	return err
}

// shut marks c closed, so that no write starts after it returns, and says
// whether Close did it first and which write error did, if one did.
func (c *clientConn) shut() (local bool, reason error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	local, reason = c.closed && c.reason == nil, c.reason
	c.markClosed()
	return local, reason
}

// markClosed marks c closed, so that no write starts, and stops its writer
// (frames it has not written are abandoned). mu held.
func (c *clientConn) markClosed() {
	if !c.closed && c.w != nil {
		c.w.halt()
	}
	c.closed = true
}

func (c *clientConn) notifyClose(err error) {
	c.shut()
	c.once.Do(func() { c.h.OnClose(err) })
}

// clientEvents is the gnet event handler shared by a Dialer's connections.
type clientEvents struct {
	gnet.BuiltinEventEngine
	park  *parker
	mu    sync.Mutex
	conns map[*clientConn]struct{} // for the ticker and the parker
}

// add lists c unless it closed already (OnClose may run before Dial
// returns).
func (e *clientEvents) add(c *clientConn) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c.gone {
		return
	}
	if e.conns == nil {
		e.conns = make(map[*clientConn]struct{})
	}
	e.conns[c] = struct{}{}
}

// shutAll marks every listed connection closed (and so stops its writer).
func (e *clientEvents) shutAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for c := range e.conns {
		c.shut()
	}
}

// any returns one of the connections, nil if there is none.
func (e *clientEvents) any() gnet.Conn {
	e.mu.Lock()
	defer e.mu.Unlock()
	for c := range e.conns {
		return c.gc
	}
	return nil
}

func (e *clientEvents) OnOpen(gc gnet.Conn) ([]byte, gnet.Action) {
	c, ok := gc.Context().(*clientConn)
	if !ok {
		return nil, gnet.Close
	}
	e.park.watch(gc.Fd())
	c.mu.Lock()
	c.opened = true
	c.mu.Unlock()
	return nil, gnet.None
}

func (e *clientEvents) OnTraffic(gc gnet.Conn) gnet.Action {
	c, ok := gc.Context().(*clientConn)
	if !ok {
		return gnet.Close
	}
	fresh := gc.InboundBuffered() > c.left // a read, not a Wake
	c.releaseWritten(gc)
	left, err := readFrames(gc, c.d.cfg.MaxFrame, func(frame []byte) error {
		c.h.OnFrame(frame)
		return nil
	})
	if err != nil {
		c.notifyClose(err)
		return gnet.Close
	}
	c.left = left
	if fresh {
		e.park.traffic(gc)
	}
	return gnet.None
}

func (e *clientEvents) OnClose(gc gnet.Conn, err error) gnet.Action {
	c, ok := gc.Context().(*clientConn)
	if !ok {
		return gnet.None
	}
	e.mu.Lock()
	c.gone = true
	delete(e.conns, c)
	e.mu.Unlock()
	e.park.unwatch(gc.Fd())
	c.held = nil
	local, reason := c.shut() // gnet closes the descriptor after this returns
	if c.viaLoop.Swap(false) {
		e.park.release(e.any)
	} else {
		e.park.arm(e.any()) // the closed one may have been the one to park through
	}
	switch {
	case err != nil:
	case reason != nil:
		err = reason
	case !local:
		err = transport.ErrClosed // the broker hung up
	}
	c.notifyClose(err)
	return gnet.None
}

// OnTick wakes connections that write through gnet, so that buffers whose
// bytes reached the socket are released, and writing is handed back, even
// when no inbound traffic or further write comes to run the check.
func (e *clientEvents) OnTick() (time.Duration, gnet.Action) {
	e.mu.Lock()
	for c := range e.conns {
		if c.viaLoop.Load() {
			_ = c.gc.Wake(func(gc gnet.Conn, _ error) error {
				c.releaseWritten(gc)
				return nil
			})
		}
	}
	e.mu.Unlock()
	return 10 * time.Millisecond, gnet.None
}
