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
