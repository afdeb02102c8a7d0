package file

import (
	"io"

	"golang.org/x/sys/unix"
)

// maxIOV is how many buffers one pwritev takes (Linux's IOV_MAX).
const maxIOV = 1024

// WriteBuffersAt writes bufs at off with pwritev, as few calls as the
// system allows (one for a commit of up to maxIOV entries); a short write
// goes on from where it stopped.
func (f osFile) WriteBuffersAt(bufs [][]byte, off int64) (int, error) {
	if len(bufs) == 1 {
		return f.WriteAt(bufs[0], off)
	}
	fd := int(f.Fd())
	total := 0
	var iov [][]byte // pwritev is given a fresh slice header each call
	for len(bufs) > 0 {
		iov = append(iov[:0], bufs[:min(len(bufs), maxIOV)]...)
		n, err := unix.Pwritev(fd, iov, off+int64(total))
		total += n
		if err != nil {
			return total, err
		}
		if n == 0 {
			return total, io.ErrShortWrite
		}
		// Drop what was written: whole buffers, then the start of the next.
		for n > 0 && len(bufs) > 0 {
			if n >= len(bufs[0]) {
				n -= len(bufs[0])
				bufs = bufs[1:]
				continue
			}
			bufs = append([][]byte{bufs[0][n:]}, bufs[1:]...)
			n = 0
		}
	}
	return total, nil
}
