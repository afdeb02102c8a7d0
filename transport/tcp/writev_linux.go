package tcp

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/inflightmq/inflight/transport"
)

type iovec = unix.Iovec

// maxIovecs is how many buffers one writev takes (Linux's IOV_MAX).
const maxIovecs = 1024

// writeAll writes bufs to the non-blocking socket fd, in order, with one
// writev per up to maxIovecs buffers, until all are written or the socket
// takes no more; of bufs[0] it writes from, the end of its bytes (all of
// them, or what an earlier call left). It returns how many buffers were
// written whole, and the bytes left of the next one. iov is the caller's
// scratch.
func writeAll(fd int, iov *[]iovec, bufs []*transport.Buffer, from []byte) (int, []byte, error) {
	sent, rest := 0, from
	for sent < len(bufs) {
		v := (*iov)[:0]
		for i := sent; i < len(bufs) && len(v) < maxIovecs; i++ {
			b := bufs[i].Bytes
			if i == sent {
				b = rest
			}
			if len(b) == 0 {
				continue
			}
			e := unix.Iovec{Base: &b[0]}
			e.SetLen(len(b))
			v = append(v, e)
		}
		*iov = v
		if len(v) == 0 {
			return len(bufs), nil, nil
		}
		r, _, errno := unix.Syscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&v[0])), uintptr(len(v)))
		clear(v) // no pointers into the frames kept
		n := int(r)
		switch {
		case errno == unix.EINTR:
			continue
		case errno == unix.EAGAIN || errno == 0 && n <= 0:
			return sent, rest, nil
		case errno != 0:
			return sent, rest, errno
		}
		// Skip what n covers: whole buffers, then part of one.
		for sent < len(bufs) && n >= len(rest) {
			n -= len(rest)
			if sent++; sent < len(bufs) {
				rest = bufs[sent].Bytes
			} else {
				rest = nil
			}
		}
		if sent < len(bufs) {
			rest = rest[n:]
		}
	}
	return sent, nil, nil
}
