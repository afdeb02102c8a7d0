//go:build !unix

package cpuclock

import "time"

// Process returns 0 and false: this platform does not report the CPU time
// of a process through getrusage (see cpuclock_unix.go).
func Process() (time.Duration, bool) { return 0, false }
