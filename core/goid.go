package core

import "runtime"

// goid returns the calling goroutine's ID, parsed from the first line of
// its stack trace ("goroutine 123 [running]:"). It costs about a
// microsecond, so it is used only where a call must not wait for itself:
// Close and Flush from a callback.
func goid() uint64 {
	var buf [40]byte
	b := buf[:runtime.Stack(buf[:], false)]
	const prefix = "goroutine "
	if len(b) < len(prefix) || string(b[:len(prefix)]) != prefix {
		return 0
	}
	var id uint64
	for _, c := range b[len(prefix):] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}
