//go:build !linux

package tcp

import "github.com/panjf2000/gnet/v2"

// parker is not built here: the event loop waits in gnet's poller, and
// keeps its P while it waits (see doc.go). A nil *parker does nothing.
type parker struct{}

func newParker() *parker                   { return nil }
func (p *parker) close()                   {}
func (p *parker) watch(int)                {}
func (p *parker) unwatch(int)              {}
func (p *parker) hold()                    {}
func (p *parker) release(func() gnet.Conn) {}
func (p *parker) arm(gnet.Conn)            {}
func (p *parker) traffic(gnet.Conn)        {}
func (p *parker) parked() int64            { return -1 }
