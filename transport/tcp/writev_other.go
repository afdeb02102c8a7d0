//go:build !linux

package tcp

import "github.com/inflightmq/inflight/transport"

type iovec struct{}

// writeAll writes bufs one by one with writeSome (no vectored write here),
// until all are written or the socket takes no more. It returns how many
// buffers were written whole, and the bytes left of the next one.
func writeAll(fd int, _ *[]iovec, bufs []*transport.Buffer) (int, []byte, error) {
	for i, b := range bufs {
		rest, err := writeSome(fd, b.Bytes)
		if err != nil || len(rest) > 0 {
			return i, rest, err
		}
	}
	return len(bufs), nil, nil
}
