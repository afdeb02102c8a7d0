package tcp

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/wire"
)

type iovec = unix.Iovec

// maxIovecs is how many buffers one writev takes (Linux's IOV_MAX).
const maxIovecs = 1024

// spliceWrites: frames with splices are written piece by piece here (see
// clientConn.Splicing).
const spliceWrites = true

// writeAll writes bufs to the non-blocking socket fd, in order, with one
// writev per up to maxIovecs pieces (a buffer's Bytes, or the parts of
// them and its splices' Data in frame order), until all are written or the
// socket takes no more; of bufs[0] it writes from byte off of its frame (0,
// or what an earlier call returned). It returns how many buffers were
// written whole, and how far into the next one it wrote. iov is the
// caller's scratch. It reads the splices' memory only during its calls.
func writeAll(fd int, iov *[]iovec, bufs []*transport.Buffer, off int) (int, int, error) {
	sent := 0
	for sent < len(bufs) {
		v := (*iov)[:0]
		for i := sent; i < len(bufs) && len(v) < maxIovecs; i++ {
			from := 0
			if i == sent {
				from = off
			}
			v = appendPieces(v, bufs[i], from)
		}
		*iov = v
		if len(v) == 0 {
			return len(bufs), 0, nil
		}
		r, _, errno := unix.Syscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&v[0])), uintptr(len(v)))
		clear(v) // no pointers into the frames kept
		n := int(r)
		switch {
		case errno == unix.EINTR:
			continue
		case errno == unix.EAGAIN || errno == 0 && n <= 0:
			return sent, off, nil
		case errno != 0:
			return sent, off, errno
		}
		// Skip what n covers: whole buffers, then part of one.
		for sent < len(bufs) {
			left := bufs[sent].Len() - off
			if n < left {
				off += n
				break
			}
			n -= left
			sent++
			off = 0
		}
	}
	return sent, 0, nil
}

// appendPieces appends to v, up to maxIovecs entries, the pieces of b's
// frame from byte from on: its Bytes, or with splices the parts of Bytes
// between them and their Data, in frame order; empty pieces are left out.
func appendPieces(v []iovec, b *transport.Buffer, from int) []iovec {
	for p := range wire.Pieces(b.Bytes, b.Splices) {
		v, from = appendPiece(v, p, from)
	}
	return v
}

// appendPiece appends p's bytes from skip on as an iovec, if any and if v
// has room, and returns what is left to skip of the pieces after p.
func appendPiece(v []iovec, p []byte, skip int) ([]iovec, int) {
	if skip >= len(p) {
		return v, skip - len(p)
	}
	if len(v) < maxIovecs {
		p = p[skip:]
		e := unix.Iovec{Base: &p[0]}
		e.SetLen(len(p))
		v = append(v, e)
	}
	return v, 0
}
