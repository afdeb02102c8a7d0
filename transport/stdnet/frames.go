package stdnet

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/inflightmq/inflight/wire"
)

// waiter is told when a frameReader is about to block on the socket, so
// that a server can flush its replies and arm the right read deadline.
type waiter interface {
	// idle: no byte of the next frame has arrived yet.
	idle() error
	// started: a frame has begun and its remaining bytes are awaited;
	// called once per frame, at its first blocking read.
	started() error
}

// noWait is the client's waiter: the producer's heartbeat, not a read
// deadline, decides when a broker is too quiet.
type noWait struct{}

func (noWait) idle() error    { return nil }
func (noWait) started() error { return nil }

// frameReader splits a byte stream into frames. It reads through a
// bufio.Reader so that many small frames cost one read, and hands out a
// frame that fits the buffer without copying it. It checks the length
// prefix before reading the body: a frame over max is an error as soon as
// its 4 bytes are in. A larger frame is read into a buffer that grows as its
// bytes arrive, never to the size the prefix merely claims.
type frameReader struct {
	r         *bufio.Reader
	max       int
	big       []byte // reused for frames larger than r's buffer
	lastLarge bool   // the last frame was read into big
	wait      waiter
	grew      func(held int) // if set, told what the reader holds after big grows
}

// keepLarge is the largest large-frame buffer a reader keeps between frames:
// room for a batch of the producer's default size (1 MiB). A larger one,
// grown for a larger frame, is dropped once a frame that fits the reader's
// buffer has been read after it (a small batch, a heartbeat), so that a
// connection does not hold the memory of one large frame for the rest of
// its life, while a run of large frames reuses it.
const keepLarge = 2 << 20

func newFrameReader(r io.Reader, size, maxFrame int, w waiter) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, size), max: maxFrame, wait: w}
}

// next returns the next complete frame, valid until the following call.
// Errors: the read error (io.EOF when the peer hung up between frames),
// wire.ErrFrameTooLarge or wire.ErrMalformed for a bad prefix, ErrIdle or
// ErrReadTimeout when a read deadline the waiter set passed (before a frame
// began, or within one).
func (f *frameReader) next() ([]byte, error) {
	if cap(f.big) > keepLarge && !f.lastLarge {
		f.big = nil // the frame handed out from it is no longer valid anyway
	}
	f.lastLarge = false
	if f.r.Buffered() == 0 {
		if err := f.wait.idle(); err != nil {
			return nil, err
		}
		if _, err := f.r.Peek(1); err != nil {
			return nil, readError(err, ErrIdle)
		}
	}
	armed := false
	if f.r.Buffered() < 4 {
		if err := f.wait.started(); err != nil {
			return nil, err
		}
		armed = true
	}
	prefix, err := f.r.Peek(4)
	if err != nil {
		return nil, readError(truncated(err), ErrReadTimeout)
	}
	if _, _, err := wire.Split(prefix, f.max); err != nil {
		return nil, err
	}
	size, _ := wire.FrameSize(prefix)
	if !armed && f.r.Buffered() < size {
		if err := f.wait.started(); err != nil {
			return nil, err
		}
	}
	if size > f.r.Size() {
		f.lastLarge = true
		return f.readLarge(size)
	}
	frame, err := f.r.Peek(size)
	if err != nil {
		return nil, readError(truncated(err), ErrReadTimeout)
	}
	_, _ = f.r.Discard(size) // the peeked bytes stay valid until the next read
	return frame, nil
}

// readLarge reads a frame of size bytes that does not fit the buffer,
// growing big as the bytes arrive.
func (f *frameReader) readLarge(size int) ([]byte, error) {
	buf := f.big[:0]
	for len(buf) < size {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(size, max(2*cap(buf), 2*f.r.Size())))
			copy(grown, buf)
			buf = grown
			if f.grew != nil {
				f.grew(f.r.Size() + cap(buf))
			}
		}
		n, err := f.r.Read(buf[len(buf):min(cap(buf), size)])
		buf = buf[:len(buf)+n]
		if err != nil && len(buf) < size {
			f.big = buf[:0]
			return nil, readError(truncated(err), ErrReadTimeout)
		}
	}
	f.big = buf[:0]
	return buf, nil
}

// buffered returns the most bytes the reader holds for one frame: its
// buffer and the large-frame buffer.
func (f *frameReader) buffered() int { return f.r.Size() + cap(f.big) }

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
