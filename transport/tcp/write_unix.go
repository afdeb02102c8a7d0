//go:build unix

package tcp

import "golang.org/x/sys/unix"

// directWrites: WriteFrame writes to the socket itself here.
const directWrites = true

// writeSome writes b to the non-blocking socket fd until all of it is
// written or the socket takes no more, and returns what is left.
func writeSome(fd int, b []byte) ([]byte, error) {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		switch {
		case err == unix.EINTR:
		case err == unix.EAGAIN || err == nil && n <= 0:
			return b, nil
		case err != nil:
			return b, err
		default:
			b = b[n:]
		}
	}
	return b, nil
}
