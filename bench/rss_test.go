package bench

import (
	"bufio"
	"context"
	"flag"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/server"
	"github.com/inflightmq/inflight/transport/tcp"
)

var rssFor = flag.Duration("bench.rss", 0, "run TestRSSBound for this long (make bench: 60s; 0 skips it)")

// TestRSSBound floods a producer over TCP while the broker is down half the
// time (1 s up, 1 s down) and checks that the process's resident memory
// stays within MaxPendingBytes plus a constant above where it started. It
// reports the peak. Fresh payloads are allocated for every message, so the
// pending bytes are real memory.
func TestRSSBound(t *testing.T) {
	if *rssFor == 0 {
		t.Skip("run with: go test ./bench/ -run TestRSSBound -bench.rss=60s")
	}
	const maxPending = 64 << 20
	const size = 1 << 10
	store := broker.NewCountingStore()
	b, _ := broker.New(store)
	srv, err := server.New("127.0.0.1:0", b)
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr().String()
	d, err := tcp.NewDialer(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	p, err := core.New(d, core.Name("rss"), core.MaxPendingBytes(maxPending), core.MaxPending(maxPending/size),
		core.SendTimeout(5*time.Second), core.ReconnectBackoff(10*time.Millisecond, 100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	base := rss(t, "VmRSS")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sent, failed atomic.Int64
	wg.Go(func() { // the flood
		cb := func(_ core.MessageID, _ *core.Message, err error) {
			if err != nil {
				failed.Add(1)
			}
		}
		for {
			select {
			case <-stop:
				return
			default:
			}
			if p.SendAsync(context.Background(), &core.Message{Payload: make([]byte, size)}, cb) == nil {
				sent.Add(1)
			}
		}
	})
	var mu sync.Mutex
	wg.Go(func() { // the broker: up a second, down a second
		for up := true; ; up = !up {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			mu.Lock()
			if up {
				_ = srv.Close(context.Background())
			} else if srv, err = server.New(addr, b); err != nil {
				t.Error(err)
			}
			mu.Unlock()
		}
	})
	var peak int64
	deadline := time.Now().Add(*rssFor)
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		peak = max(peak, rss(t, "VmRSS"))
	}
	close(stop)
	wg.Wait()
	_ = p.Close(context.Background())
	mu.Lock()
	_ = srv.Close(context.Background())
	mu.Unlock()
	hwm := rss(t, "VmHWM")
	t.Logf("RSS: start %d MiB, peak sampled %d MiB, high-water mark %d MiB; MaxPendingBytes %d MiB; %d messages sent, %d failed",
		base>>20, peak>>20, hwm>>20, maxPending>>20, sent.Load(), failed.Load())
	if bound := base + 2*maxPending + 128<<20; hwm > bound {
		t.Errorf("peak RSS %d MiB over %d MiB (start + 2 x MaxPendingBytes for Go's GC headroom + 128 MiB)", hwm>>20, bound>>20)
	}
}

// rss returns a /proc/self/status memory field in bytes.
func rss(t *testing.T, field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skip("no /proc")
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}
