//go:build unix

package cpuclock

import (
	"syscall"
	"time"
)

// Process returns the CPU time, user and system, of every thread of the
// process so far, and true; or 0 and false where the platform does not
// report it.
func Process() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
