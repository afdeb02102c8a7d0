// Command plot measures the inflight producer in this process and draws two
// PNGs:
//
//   - throughput.png: acknowledged msgs/s and MB/s of payload against the
//     payload size (100 B to 64 KiB), over transport/mem and over
//     transport/tcp on loopback; one producer sending as fast as it can,
//     every message acknowledged.
//   - latency-cdf.png: the distribution of send-to-callback latency over
//     TCP at a fixed offered rate (default 100k msgs/s of 100 B), with its
//     p50, p99 and p999.
//
// Usage (from bench/peers):
//
//	go run ./cmd/plot -out ../../docs
//
// Each throughput point first runs for -warm to connect, warm up and
// estimate the rate, then sends a fixed number of messages, -dur worth at
// that rate, and times them from the first send to the last callback. The
// whole run takes about 8 x (warm + dur) + latdur, under 30 s with the
// defaults.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/inflightmq/inflight/bench/peers/internal/workload"
)

func main() {
	out := flag.String("out", ".", "directory the PNGs are written to")
	sizes := flag.String("sizes", "100,1024,16384,65536", "payload sizes of the throughput plot, in bytes")
	warm := flag.Duration("warm", 300*time.Millisecond, "throughput: warm-up per point")
	dur := flag.Duration("dur", 2*time.Second, "throughput: messages per point, as this much time at the warm-up rate")
	rate := flag.Int("rate", 100_000, "latency: offered rate in msgs/s")
	latSize := flag.Int("latsize", 100, "latency: payload size in bytes")
	latDur := flag.Duration("latdur", 3*time.Second, "latency: how long to send at -rate")
	flag.Parse()

	if err := run(*out, *sizes, *warm, *dur, *rate, *latSize, *latDur); err != nil {
		fmt.Fprintln(os.Stderr, "plot:", err)
		os.Exit(1)
	}
}

func run(out, sizeList string, warm, dur time.Duration, rate, latSize int, latDur time.Duration) error {
	sizes, err := workload.ParseSizes(sizeList)
	if err != nil {
		return fmt.Errorf("-sizes: %w", err)
	}
	if rate <= 0 || latSize <= 0 || warm <= 0 || dur <= 0 || latDur <= 0 {
		return fmt.Errorf("-rate, -latsize, -warm, -dur and -latdur must be positive")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	began := time.Now()

	var series []series
	for _, tr := range []string{"mem", "tcp"} {
		s, err := throughput(tr, sizes, warm, dur)
		if err != nil {
			return fmt.Errorf("throughput over %s: %w", tr, err)
		}
		series = append(series, s)
	}
	if err := drawThroughput(filepath.Join(out, "throughput.png"), series); err != nil {
		return err
	}

	lat, err := pacedLatency(rate, latSize, latDur)
	if err != nil {
		return fmt.Errorf("latency: %w", err)
	}
	fmt.Printf("latency over tcp, %d B at %d msgs/s offered (%.0f achieved, %d messages, %.0f per wake-up): p50 %v  p99 %v  p999 %v  max %v\n",
		latSize, rate, lat.achieved, lat.hist.Count(), lat.perWake,
		lat.hist.Quantile(0.50), lat.hist.Quantile(0.99), lat.hist.Quantile(0.999), lat.hist.Max())
	if err := drawLatency(filepath.Join(out, "latency-cdf.png"), lat); err != nil {
		return err
	}
	fmt.Printf("wrote %s and %s in %.1fs\n", filepath.Join(out, "throughput.png"),
		filepath.Join(out, "latency-cdf.png"), time.Since(began).Seconds())
	return nil
}
