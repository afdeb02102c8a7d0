package tcp

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// parker lets a Dialer's event loop wait in the Go scheduler rather than in
// epoll_wait while none of its connections has anything for it. gnet's loop
// blocks in epoll_wait, a system call, and keeps its P while it waits (see
// doc.go); parked, it holds none.
//
// How: a task on the loop (queued with Wake) waits, through the runtime's
// poller, until one of the connections' sockets is readable (inbound bytes,
// a hang-up, an error) or until someone needs the loop for something else
// (hold), and then returns, so that gnet reads the sockets and runs what is
// queued. The sockets are watched by an epoll instance of the parker's own,
// level-triggered, read-only; its descriptor is what the runtime's poller
// waits on. gnet's own epoll still watches them: parking only changes where
// the loop waits, never what it does.
//
// When: the loop parks for its next wait when inbound bytes came after a
// gap of parkAfter or more (traffic), and after a hold ends. Inbound bytes
// closer together than that mean a loop that is woken all the time: it then
// waits in epoll_wait, where the kernel wakes its thread the moment bytes
// come (the runtime's poller hands a parked loop to whichever thread looks
// next, which on a busy host can be milliseconds later), and keeps its P for
// gaps that short. If the gap turns long, because the traffic stopped, that
// one wait keeps the P until sysmon takes it (within some 20 ms); the next
// inbound bytes park the loop again.
//
// Everyone who queues work for the loop, other than a read (Dial's enroll,
// Close, writes through gnet, the Dialer's Stop), holds the parker first:
// the count is raised, and a parked loop is woken by a past read deadline;
// release lowers it and queues the park again.
type parker struct {
	ep    int // the parker's epoll instance: the sockets, for reading
	file  *os.File
	raw   syscall.RawConn
	busy  atomic.Int64 // holds: work for the loop besides reading
	armed atomic.Bool  // a park task is queued or running
	off   atomic.Bool  // a socket could not be watched: the loop no longer parks

	events []unix.EpollEvent // loop only
	last   time.Time         // loop only: when inbound bytes last came
	parks  atomic.Int64      // parks that waited
}

// parkAfter is the gap between inbound bytes from which the loop parks for
// its next wait. On the 2-vCPU host of docs/performance.md a producer at
// full speed gets its receipts some 0.3-1.5 ms apart (frames of thousands
// of messages), one paced at 100k msgs/s some 40 µs apart on average.
const parkAfter = 100 * time.Microsecond

// longAgo is a read deadline that has passed: it ends a park.
var longAgo = time.Unix(1, 0)

// newParker returns a parker, or nil if the runtime's poller cannot wait on
// an epoll instance here (then the loop waits in epoll_wait, as gnet does).
func newParker() *parker {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil
	}
	if err := unix.SetNonblock(ep, true); err != nil {
		_ = unix.Close(ep)
		return nil
	}
	file, raw, ok := onPoller(ep, "inflight-tcp-parker")
	if !ok {
		return nil
	}
	return &parker{ep: ep, file: file, raw: raw, events: make([]unix.EpollEvent, 1)}
}

// onPoller makes the non-blocking descriptor fd a file on the runtime's
// poller, which owns fd from here (and has closed it if !ok: the poller
// does not take it), and returns its raw access.
func onPoller(fd int, name string) (*os.File, syscall.RawConn, bool) {
	file := os.NewFile(uintptr(fd), name)
	if file.SetDeadline(time.Time{}) != nil { // not on the runtime's poller
		_ = file.Close()
		return nil, nil, false
	}
	raw, err := file.SyscallConn()
	if err != nil {
		_ = file.Close()
		return nil, nil, false
	}
	return file, raw, true
}

// close releases the epoll instance. The loop must have stopped.
func (p *parker) close() {
	if p != nil {
		_ = p.file.Close()
	}
}

// watch adds a connection's socket. Loop only (OnOpen): gnet's descriptor is
// open from OnOpen until OnClose returns.
func (p *parker) watch(fd int) {
	if p == nil {
		return
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)}
	if err := unix.EpollCtl(p.ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		// A socket the parker does not see could wait unread behind a
		// park: never park again.
		p.off.Store(true)
		p.kick()
	}
}

// unwatch removes a connection's socket. Loop only (OnClose, before gnet
// closes the descriptor).
func (p *parker) unwatch(fd int) {
	if p != nil {
		_ = unix.EpollCtl(p.ep, unix.EPOLL_CTL_DEL, fd, nil)
	}
}

// hold says the loop has work besides reading, which is, or is about to be,
// queued: the loop does not park until the matching release, and a parked
// loop returns. Any goroutine.
func (p *parker) hold() {
	if p != nil {
		p.busy.Add(1)
		p.kick()
	}
}

// release ends a hold and, if it was the last, queues a park through one of
// the connections (conn returns it, nil for none). Any goroutine.
func (p *parker) release(conn func() gnet.Conn) {
	if p != nil && p.busy.Add(-1) == 0 {
		p.arm(conn())
	}
}

// traffic notes inbound bytes and parks the loop for its next wait if the
// gap since the last ones was long. Loop only (OnTraffic).
func (p *parker) traffic(gc gnet.Conn) {
	if p == nil {
		return
	}
	now := time.Now()
	gap := now.Sub(p.last)
	p.last = now
	if gap >= parkAfter {
		p.arm(gc)
	}
}

// kick ends a park, if one is waiting.
func (p *parker) kick() { _ = p.file.SetReadDeadline(longAgo) }

// arm queues a park on the loop through gc unless one is queued, the loop is
// held, or gc is nil. Any goroutine.
func (p *parker) arm(gc gnet.Conn) {
	if p == nil || gc == nil || p.stay() || !p.armed.CompareAndSwap(false, true) {
		return
	}
	err := gc.Wake(func(gc gnet.Conn, _ error) error {
		held := p.park()
		p.armed.Store(false)
		if held && !p.stay() {
			// The hold ended while the park returned for it, and
			// its release found the park still armed.
			p.arm(gc)
		}
		return nil
	})
	if err != nil {
		p.armed.Store(false)
	}
}

// parked reports how many parks waited, -1 for a nil parker.
func (p *parker) parked() int64 {
	if p == nil {
		return -1
	}
	return p.parks.Load()
}

// stay reports whether the loop must not park.
func (p *parker) stay() bool { return p.busy.Load() > 0 || p.off.Load() }

// park waits until a watched socket is readable or the loop is held, and
// reports whether it returned for a hold. Loop only (a task).
func (p *parker) park() (held bool) {
	waited := false
	for {
		// The deadline is reset before the count is read: a hold
		// raises the count before it sets the deadline, so it is seen
		// either here or by the wait.
		_ = p.file.SetReadDeadline(time.Time{})
		if p.stay() {
			return true
		}
		err := p.raw.Read(func(uintptr) bool {
			if p.stay() || p.readable() {
				return true
			}
			if !waited {
				waited = true
				p.parks.Add(1)
			}
			return false
		})
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return p.stay() // readable, or the parker is closed
		}
	}
}

// readable reports whether a watched socket has something for the loop.
// It looks without consuming anything: the sockets are level-triggered.
func (p *parker) readable() bool {
	for {
		n, err := unix.EpollWait(p.ep, p.events, 0)
		if err != unix.EINTR {
			return n > 0 || err != nil
		}
	}
}
