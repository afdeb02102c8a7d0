//go:build !linux

package tcp

import "github.com/inflightmq/inflight/transport"

// handOffBytes: no run of frames goes to a writer goroutine here (see
// writer_linux.go); frames are written as doc.go says.
const handOffBytes = 512 << 10

// writer is not built here: startWriter never starts one.
type writer struct{ queue []*transport.Buffer }

func (c *clientConn) startWriter() bool   { return false }
func (w *writer) kick()                   {}
func (w *writer) halt()                   {}
func (w *writer) waited() int64           { return 0 }
func (w *writer) wait()                   {}
func (w *writer) detach() <-chan struct{} { return nil }
