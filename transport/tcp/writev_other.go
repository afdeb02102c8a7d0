//go:build !linux

package tcp

import "github.com/inflightmq/inflight/transport"

type iovec struct{}

// spliceWrites: no frame with splices is written here; WriteFrames copies
// a misplaced one whole first (see clientConn.Splicing).
const spliceWrites = false

// writeAll writes bufs one by one with writeSome (no vectored write here),
// until all are written or the socket takes no more; of bufs[0] it writes
// from byte off. It returns how many buffers were written whole, and how
// far into the next one it wrote. bufs have no splices here.
func writeAll(fd int, _ *[]iovec, bufs []*transport.Buffer, off int) (int, int, error) {
	for i, b := range bufs {
		if i > 0 {
			off = 0
		}
		rest, err := writeSome(fd, b.Bytes[off:])
		if err != nil || len(rest) > 0 {
			return i, len(b.Bytes) - len(rest), err
		}
	}
	return len(bufs), 0, nil
}
