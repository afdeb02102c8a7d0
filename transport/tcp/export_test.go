package tcp

import "github.com/inflightmq/inflight/transport"

// Parks reports how many times d's event loop parked (waited in the Go
// scheduler), -1 where it does not park.
func Parks(d *Dialer) int64 { return d.park.parked() }

// ViaLoop reports whether c's frames go through gnet's queue.
func ViaLoop(c transport.Conn) bool { return c.(*clientConn).viaLoop.Load() }

// DirectWrites reports whether WriteFrame writes to the socket itself on
// this platform.
const DirectWrites = directWrites

// ViaWriter reports whether c's frames go to its writer goroutine, and how
// many runs of frames it has handed there.
func ViaWriter(c transport.Conn) (bool, int64) {
	cc := c.(*clientConn)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.viaWriter, cc.toWriter
}

// HandOffBytes is the smallest run of frames that goes to the writer.
const HandOffBytes = handOffBytes

// WriterWaits reports how many times c's writer found the socket full and
// waited for it, 0 if c has no writer.
func WriterWaits(c transport.Conn) int64 {
	cc := c.(*clientConn)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.w.waited()
}
