// Package frames splits a byte stream into inflight frames: the reader
// that the broker's server and the standard-library dialer share.
package frames

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/inflightmq/inflight/wire"
)

// Waiter is told when a Reader is about to block on its stream, so that a
// server can arm the right read deadline. An error it returns is returned
// by Next.
type Waiter interface {
	// Idle: no byte of the next frame has arrived yet.
	Idle() error
	// Started: a frame has begun and its remaining bytes are awaited;
	// called once per frame, at its first blocking read.
	Started() error
}

// NoWait is a Waiter that does nothing: a producer's heartbeat, not a read
// deadline, decides when a broker is too quiet.
type NoWait struct{}

func (NoWait) Idle() error    { return nil }
func (NoWait) Started() error { return nil }

// Reader splits a byte stream into frames. It reads through a
// bufio.Reader so that many small frames cost one read, and hands out a
// frame that fits the buffer without copying it. It checks the length
// prefix before reading the body: a frame over max is an error as soon as
// its 4 bytes are in. A larger frame is read into a buffer that grows as its
// bytes arrive, never to the size the prefix merely claims; that buffer is
// taken from a pool shared by every Reader of the process and given back at
// the next call to Next, so that between frames a Reader holds only its
// bufio buffer, however large its last frame was.
// It is not safe for concurrent use.
type Reader struct {
	r    *bufio.Reader
	max  int
	big  *[]byte // the buffer of the last frame, if larger than r's buffer
	wait Waiter
	// Grew, if set, is told what the reader holds after its large-frame
	// buffer grew (see Held).
	Grew func(held int)
	// Timeouts name a passed read deadline: IdleTimeout before a frame
	// began, ReadTimeout within one (see Next).
	IdleTimeout, ReadTimeout error
}

// keepLarge is the largest large-frame buffer the pool keeps: room for a
// batch of the producer's default size (1 MiB). A larger one, grown for a
// larger frame, is left to the garbage collector.
const keepLarge = 2 << 20

// largePool holds the large-frame buffers of every Reader between frames
// (*[]byte).
var largePool sync.Pool

// NewReader returns a Reader of frames up to maxFrame bytes from r, through
// a buffer of size bytes. w is told before every blocking read (NoWait{}
// for none).
func NewReader(r io.Reader, size, maxFrame int, w Waiter) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, size), max: maxFrame, wait: w,
		IdleTimeout: errIdle, ReadTimeout: errReadTimeout}
}

var (
	errIdle        = errors.New("inflight: connection idle")
	errReadTimeout = errors.New("inflight: frame not completed in time")
)

// Next returns the next complete frame, valid until the following call.
// Errors: the read error (io.EOF when the peer hung up between frames),
// wire.ErrFrameTooLarge or wire.ErrMalformed for a bad prefix, the Waiter's
// error, or IdleTimeout or ReadTimeout (wrapping os.ErrDeadlineExceeded)
// when a read deadline passed before a frame began, or within one.
func (f *Reader) Next() ([]byte, error) {
	f.release() // the frame handed out from it is no longer valid anyway
	if f.r.Buffered() == 0 {
		if err := f.wait.Idle(); err != nil {
			return nil, err
		}
		if _, err := f.r.Peek(1); err != nil {
			return nil, readError(err, f.IdleTimeout)
		}
	}
	armed := false
	if f.r.Buffered() < 4 {
		if err := f.wait.Started(); err != nil {
			return nil, err
		}
		armed = true
	}
	prefix, err := f.r.Peek(4)
	if err != nil {
		return nil, readError(truncated(err), f.ReadTimeout)
	}
	if _, _, err := wire.Split(prefix, f.max); err != nil {
		return nil, err
	}
	size, _ := wire.FrameSize(prefix)
	if !armed && f.r.Buffered() < size {
		if err := f.wait.Started(); err != nil {
			return nil, err
		}
	}
	if size > f.r.Size() {
		return f.readLarge(size)
	}
	frame, err := f.r.Peek(size)
	if err != nil {
		return nil, readError(truncated(err), f.ReadTimeout)
	}
	_, _ = f.r.Discard(size) // the peeked bytes stay valid until the next read
	return frame, nil
}

// readLarge reads a frame of size bytes that does not fit the buffer,
// growing big as the bytes arrive.
func (f *Reader) readLarge(size int) ([]byte, error) {
	p, _ := largePool.Get().(*[]byte)
	if p == nil {
		p = new([]byte)
	} else if f.Grew != nil {
		f.Grew(f.r.Size() + cap(*p))
	}
	f.big = p
	buf := (*p)[:0]
	for len(buf) < size {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(size, max(2*cap(buf), 2*f.r.Size())))
			copy(grown, buf)
			buf = grown
			*p = buf
			if f.Grew != nil {
				f.Grew(f.r.Size() + cap(buf))
			}
		}
		n, err := f.r.Read(buf[len(buf):min(cap(buf), size)])
		buf = buf[:len(buf)+n]
		if err != nil && len(buf) < size {
			f.release()
			return nil, readError(truncated(err), f.ReadTimeout)
		}
	}
	return buf, nil
}

// Keep takes the memory of the frame the last Next returned, if it is a
// large one (in a buffer of its own, not in the reader's): the reader does
// not reuse it, and the returned function, to be called exactly once from
// any goroutine, gives it back to the pool. nil for a frame in the reader's
// buffer, whose memory the next Next reuses.
func (f *Reader) Keep() func() {
	p := f.big
	if p == nil {
		return nil
	}
	f.big = nil
	return func() { putLarge(p) }
}

// release gives the large-frame buffer back to the pool.
func (f *Reader) release() {
	if p := f.big; p != nil {
		f.big = nil
		putLarge(p)
	}
}

// putLarge gives a large-frame buffer to the pool, unless it grew past
// keepLarge.
func putLarge(p *[]byte) {
	if cap(*p) <= keepLarge {
		*p = (*p)[:0]
		largePool.Put(p)
	}
}

// Held returns the bytes the reader holds now: its buffer and, until the
// next call to Next, the buffer of a large frame.
func (f *Reader) Held() int {
	if f.big == nil {
		return f.r.Size()
	}
	return f.r.Size() + cap(*f.big)
}

// truncated turns an EOF inside a frame into io.ErrUnexpectedEOF.
func truncated(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readError names a passed read deadline after what was awaited.
func readError(err, timeout error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w (%w)", timeout, err)
	}
	return err
}
