package tcp

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/inflightmq/inflight/transport"
)

// handOffBytes is the smallest run of frames (one WriteFrame or WriteFrames
// call) that goes to the connection's writer rather than to the socket from
// the caller's goroutine. The kernel takes some 150 µs or more to copy a
// run this large over loopback, far more than the writer's wake-up costs,
// and the caller builds its next frames meanwhile. A producer's frames of
// large messages reach MaxBatchBytes (1 MiB by default) and go to the
// writer; those of 100-byte messages end at MaxBatchMessages (4096, some
// 450 KiB) and stay direct, as do a paced producer's frames of a few KiB.
// On the 2-vCPU host of docs/performance.md (eighth round), 16 KiB
// messages went 24% faster with it and 1 KiB ones 6%; 100 B ones were
// level with 64 KiB as the threshold too.
const handOffBytes = 512 << 10

// writer is a connection's writer goroutine: it writes the frames handed
// to it, in order, to a duplicate of the socket's descriptor that is on the
// runtime's poller, so that while the socket takes no more it waits in the
// Go scheduler (no thread, no P), and releases each buffer once the socket
// has taken all of it. The connection starts it at its first hand-off and
// stops it when it closes (markClosed); the Dialer waits for it in Close.
// The duplicate keeps the socket open until the writer has stopped: a
// connection with a writer uses two descriptors.
type writer struct {
	c      *clientConn
	file   *os.File // the duplicate descriptor; closed by the writer as it stops
	raw    syscall.RawConn
	queue  []*transport.Buffer // under c.mu: handed over, not yet taken
	spare  []*transport.Buffer // under c.mu: the last batch, emptied, for reuse
	wake   chan struct{}       // one pending signal: queue is not empty
	stop   chan struct{}       // closed by halt
	halted atomic.Bool         // set by halt: no writeAll starts
	waits  atomic.Int64        // times the socket was full (for tests)

	// The batch being written: the writer goroutine's (see write).
	bufs []*transport.Buffer
	sent int    // bufs written whole (and released)
	rest []byte // what is left of bufs[sent]
	err  error  // the socket's error
	iov  []iovec
	more func(fd uintptr) bool // w.writeSome, made once
}

// waited reports how many times the writer found the socket full, 0 for a
// nil writer.
func (w *writer) waited() int64 {
	if w == nil {
		return 0
	}
	return w.waits.Load()
}

// errHalted: the connection closed while the writer had frames to write.
var errHalted = errors.New("inflight/tcp: the connection closed")

// startWriter starts c's writer unless it runs, and reports whether one
// does: none where the descriptor cannot be duplicated onto the runtime's
// poller (then every frame stays on the other two ways, and no writer is
// tried again for c). c.mu held, c open (its descriptor is gnet's until
// OnClose, which takes c.mu).
func (c *clientConn) startWriter() bool {
	if c.w != nil || c.noWriter {
		return c.w != nil
	}
	c.noWriter = true // unless it starts
	fd, err := unix.FcntlInt(uintptr(c.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return false
	}
	file, raw, ok := onPoller(fd, "inflight-tcp-writer")
	if !ok {
		return false
	}
	w := &writer{c: c, file: file, raw: raw, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	w.more = w.writeSome
	c.w, c.noWriter = w, false
	c.d.writers.Add(1)
	go w.run()
	return true
}

// kick tells the writer that frames are queued. c.mu held.
func (w *writer) kick() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// halt stops the writer: it starts no further write, and one waiting for
// the socket returns at once. c.mu held, once (markClosed).
func (w *writer) halt() {
	w.halted.Store(true)
	close(w.stop)
	_ = w.file.SetWriteDeadline(longAgo)
}

// run is the writer goroutine.
func (w *writer) run() {
	c := w.c
	defer c.d.writers.Done()
	defer w.file.Close()
	for {
		select {
		case <-w.wake:
		case <-w.stop:
			return
		}
		c.mu.Lock()
		batch := w.queue
		w.queue, w.spare = w.spare, nil
		c.mu.Unlock()
		if len(batch) == 0 {
			continue // the signal of frames an earlier batch took
		}
		if err := w.write(batch); err != nil {
			c.mu.Lock()
			if c.closed { // halted: the frames left are abandoned
				c.mu.Unlock()
			} else {
				_ = c.failWrite(err) // unlocks
			}
			return
		}
		clear(batch)
		c.mu.Lock()
		w.spare = batch[:0]
		if len(w.queue) == 0 {
			c.viaWriter = false // all written: the caller writes again
		}
		c.mu.Unlock()
	}
}

// write writes bufs in order, releasing each once written whole, and
// waits in the runtime's poller whenever the socket takes no more, until
// all are written, the socket fails, or halt.
func (w *writer) write(bufs []*transport.Buffer) error {
	w.bufs, w.sent, w.rest, w.err = bufs, 0, bufs[0].Bytes, nil
	err := w.raw.Write(w.more)
	if w.err != nil {
		err = w.err
	}
	w.bufs, w.rest, w.err = nil, nil, nil
	return err
}

// writeSome is raw.Write's callback: it writes what the socket takes, and
// reports whether the batch is done (written, or failed).
func (w *writer) writeSome(fd uintptr) bool {
	if w.halted.Load() {
		w.err = errHalted
		return true
	}
	n, rest, err := writeAll(int(fd), &w.iov, w.bufs[w.sent:], w.rest)
	release(w.bufs[w.sent : w.sent+n])
	w.sent, w.rest, w.err = w.sent+n, rest, err
	if err == nil && w.sent < len(w.bufs) {
		w.waits.Add(1) // the socket is full: raw.Write waits for room
		return false
	}
	return true
}
