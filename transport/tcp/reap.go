package tcp

import (
	"net"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// reapLeaked closes sockets that gnet accepted for addr but never handed to
// an event loop, once the engine has stopped. gnet accepts on its loop and
// registers the socket through a task queue; a socket accepted just before
// the engine stops is neither registered nor closed, and its client waits
// forever. Shutting the listener down first makes this rare; this makes it
// harmless. After gnet.Run returned, every socket whose local address is
// the server's and that has a peer is such a leak (the server's own
// connections were all closed by the engine). Linux only (it reads
// /proc/self/fd); elsewhere it does nothing.
func reapLeaked(addr net.Addr) {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 {
			continue
		}
		local, err := unix.Getsockname(fd)
		if err != nil || !sameAddr(local, ta) {
			continue
		}
		if _, err := unix.Getpeername(fd); err != nil {
			continue // a listener, not an accepted connection
		}
		_ = unix.Close(fd)
	}
}

func sameAddr(sa unix.Sockaddr, ta *net.TCPAddr) bool {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return sa.Port == ta.Port && net.IP(sa.Addr[:]).Equal(ta.IP)
	case *unix.SockaddrInet6:
		return sa.Port == ta.Port && net.IP(sa.Addr[:]).Equal(ta.IP)
	}
	return false
}
