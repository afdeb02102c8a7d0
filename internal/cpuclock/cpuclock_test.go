package cpuclock_test

import (
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/inflightmq/inflight/internal/cpuclock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestProcessAdvances: the CPU time the process used grows while it
// computes, and never goes back.
func TestProcessAdvances(t *testing.T) {
	start, ok := cpuclock.Process()
	if !ok {
		if runtime.GOOS != "windows" && runtime.GOOS != "plan9" && runtime.GOOS != "js" && runtime.GOOS != "wasip1" {
			t.Fatalf("no CPU time on %s, a unix", runtime.GOOS)
		}
		t.Skipf("%s does not report a process's CPU time", runtime.GOOS)
	}
	deadline := time.Now().Add(10 * time.Second)
	x := uint64(1)
	for last := start; ; {
		for i := 0; i < 1e6; i++ { // work the clock can see
			x = x*6364136223846793005 + 1442695040888963407
		}
		now, _ := cpuclock.Process()
		if now < last {
			t.Fatalf("CPU time went back from %v to %v", last, now)
		}
		if now > start {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU time still %v after 10s of computing (%d)", now, x)
		}
		last = now
	}
}
