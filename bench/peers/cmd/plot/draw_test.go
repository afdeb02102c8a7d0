package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/inflightmq/inflight/internal/leakcheck"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leakcheck.Options()...) }

func TestShort(t *testing.T) {
	for v, want := range map[float64]string{14.6e6: "15M", 4.12e6: "4.1M", 1e6: "1M", 950_400: "950k", 12.3: "12"} {
		if got := short(v); got != want {
			t.Errorf("short(%v) = %q, want %q", v, got, want)
		}
	}
}

// TestRun is the whole program in miniature: tiny points, both PNGs
// written.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("measures for a few seconds")
	}
	dir := t.TempDir()
	if err := run(dir, "100,4096", 50*time.Millisecond, 100*time.Millisecond, 20_000, 100, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"throughput.png", "latency-cdf.png"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() < 10_000 {
			t.Errorf("%s is only %d bytes", name, fi.Size())
		}
	}
}
