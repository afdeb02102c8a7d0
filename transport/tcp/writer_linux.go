package tcp

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"time"

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
// stops it when it closes (markClosed); the connection's Close and the
// Dialer's wait for it. It is the one part of the connection that reads
// frames' splices after WriteFrames returned, until Detach (see detach).
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
	done   chan struct{}       // closed as run returns

	// Detach's hand-shake (see detach): busy and answer under c.mu.
	busy      bool          // the writer holds a batch taken from queue
	answer    chan struct{} // a Detach waits for it: closed once the batch holds no splice
	detaching atomic.Bool   // answer is set: copy the batch's splices

	// The batch being written: the writer goroutine's (see write).
	bufs []*transport.Buffer
	sent int   // bufs written whole (and released)
	off  int   // how far into bufs[sent]'s frame it is written
	err  error // the socket's error
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
	w := &writer{c: c, file: file, raw: raw, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
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

// wait returns once the writer goroutine has stopped (nil: none ran). Not
// under c.mu, after halt.
func (w *writer) wait() {
	if w != nil {
		<-w.done
	}
}

// detach asks the writer to stop reading splices (see
// clientConn.Detach), and returns the channel that closes once it has;
// nil when it holds no batch. c.mu held. A writer waiting for room in the
// socket is woken by a deadline in the past, as by halt: write then
// answers and waits again.
func (w *writer) detach() <-chan struct{} {
	if !w.busy {
		return nil
	}
	if w.answer == nil {
		w.answer = make(chan struct{})
		w.detaching.Store(true) // before the deadline: the woken writer sees it
		_ = w.file.SetWriteDeadline(longAgo)
	}
	return w.answer
}

// answerDetach ends a Detach's wait, if one waits: the batch holds no
// splice any more, or none at all. c.mu held. The deadline detach set is
// cleared first, unless halt's must stay.
func (w *writer) answerDetach() {
	if w.answer == nil {
		return
	}
	w.clearDeadline()
	close(w.answer)
	w.answer = nil
	w.detaching.Store(false)
}

// clearDeadline clears the write deadline detach set, unless halt's must
// stay. c.mu held.
func (w *writer) clearDeadline() {
	if !w.halted.Load() {
		_ = w.file.SetWriteDeadline(time.Time{})
	}
}

// answerBatch answers a Detach that asked: it copies the frames of the
// batch not written whole, and ends the Detach's wait. With none asking
// (a deadline write found without one) it clears the deadline unless halt
// set it. The writer goroutine's, during write.
func (w *writer) answerBatch() {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	if w.answer == nil {
		w.clearDeadline()
		return
	}
	for _, b := range w.bufs[w.sent:] {
		b.Flatten()
	}
	w.answerDetach()
}

// run is the writer goroutine.
func (w *writer) run() {
	c := w.c
	defer c.d.writers.Done()
	defer close(w.done)
	defer w.file.Close()
	defer func() {
		c.mu.Lock()
		w.busy = false
		w.answerDetach()
		clear(w.queue) // abandoned: no frame (nor payload) kept alive through them
		w.queue = nil
		c.mu.Unlock()
	}()
	for {
		select {
		case <-w.wake:
		case <-w.stop:
			return
		}
		c.mu.Lock()
		batch := w.queue
		w.queue, w.spare = w.spare, nil
		w.busy = len(batch) > 0
		c.mu.Unlock()
		if len(batch) == 0 {
			continue // the signal of frames an earlier batch took
		}
		if err := w.write(batch); err != nil {
			clear(batch)
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
		w.busy = false
		w.answerDetach()
		w.spare = batch[:0]
		if len(w.queue) == 0 {
			c.viaWriter = false // all written: the caller writes again
		}
		c.mu.Unlock()
	}
}

// write writes bufs in order, releasing each once written whole, and
// waits in the runtime's poller whenever the socket takes no more, until
// all are written, the socket fails, or halt. A wait a Detach cut short
// (see detach) goes on once writeSome answered it.
func (w *writer) write(bufs []*transport.Buffer) error {
	w.bufs, w.sent, w.off, w.err = bufs, 0, 0, nil
	err := w.raw.Write(w.more)
	for err != nil && w.err == nil && errors.Is(err, os.ErrDeadlineExceeded) && !w.halted.Load() {
		// A Detach's deadline (raw.Write checks it before writeSome
		// too): answer it, which clears it, and go on.
		w.answerBatch()
		err = w.raw.Write(w.more)
	}
	if w.err != nil {
		err = w.err
	}
	w.bufs, w.err = nil, nil
	return err
}

// writeSome is raw.Write's callback: it writes what the socket takes, and
// reports whether the batch is done (written, or failed). Asked to detach,
// it first copies the frames it has not written whole (see
// transport.Buffer.Flatten: their offsets stay).
func (w *writer) writeSome(fd uintptr) bool {
	if w.halted.Load() {
		w.err = errHalted
		return true
	}
	if w.detaching.Load() {
		w.answerBatch()
	}
	n, off, err := writeAll(int(fd), &w.iov, w.bufs[w.sent:], w.off)
	release(w.bufs[w.sent : w.sent+n])
	w.sent, w.off, w.err = w.sent+n, off, err
	if err == nil && w.sent < len(w.bufs) {
		w.waits.Add(1) // the socket is full: raw.Write waits for room
		return false
	}
	return true
}
