//go:build !unix

package bench

import "time"

// processCPU reports that this platform does not say how much CPU time the
// process used (see cpu_unix_test.go).
func processCPU() (time.Duration, bool) { return 0, false }
