package tcp

import (
	"golang.org/x/sys/unix"

	"github.com/inflightmq/inflight/transport"
)

// ParkAfter is the gap between inbound bytes after which the loop parks.
const ParkAfter = parkAfter

// SetSendBuffer sets c's socket's send buffer to n bytes (the kernel
// doubles it), which stops the kernel's tuning of its size.
func SetSendBuffer(c transport.Conn, n int) error {
	return unix.SetsockoptInt(c.(*clientConn).fd, unix.SOL_SOCKET, unix.SO_SNDBUF, n)
}

// ShutdownWrite shuts c's socket down for writing: every later write to
// it fails (EPIPE), while reads go on.
func ShutdownWrite(c transport.Conn) error { return unix.Shutdown(c.(*clientConn).fd, unix.SHUT_WR) }

// WriterStopped reports whether c's writer goroutine has returned (true
// if c has none).
func WriterStopped(c transport.Conn) bool {
	cc := c.(*clientConn)
	cc.mu.Lock()
	w := cc.w
	cc.mu.Unlock()
	if w == nil {
		return true
	}
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}
