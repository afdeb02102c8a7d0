//go:build !linux

package tcp

import "github.com/inflightmq/inflight/transport"

type iovec struct{}

// writeAll writes bufs one by one with writeSome (no vectored write here),
// until all are written or the socket takes no more; of bufs[0] it writes
// from, the end of its bytes. It returns how many buffers were written
// whole, and the bytes left of the next one.
func writeAll(fd int, _ *[]iovec, bufs []*transport.Buffer, from []byte) (int, []byte, error) {
	for i, b := range bufs {
		if i > 0 {
			from = b.Bytes
		}
		rest, err := writeSome(fd, from)
		if err != nil || len(rest) > 0 {
			return i, rest, err
		}
	}
	return len(bufs), nil, nil
}
