package tcp

import "github.com/inflightmq/inflight/transport"

// ViaLoop reports whether c's frames go through gnet's queue.
func ViaLoop(c transport.Conn) bool { return c.(*clientConn).viaLoop.Load() }
