package peers

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/inflightmq/inflight/bench/peers/internal/workload"
	"github.com/inflightmq/inflight/internal/cpuclock"
)

var (
	sizesFlag  = flag.String("peers.sizes", "100,1024,16384", "comma-separated payload sizes in bytes")
	sampleFlag = flag.Int("peers.sample", 16, "time every n-th message, n a power of two (1: every message)")
	rateFlag   = flag.Int("peers.rate", 0, "offered load in msgs/s; 0: as fast as each client accepts")
	distinct   = flag.Bool("peers.distinct", false, "send distinct payloads in turn (64 MiB of them), not one payload over and over")
)

// warmup is how many messages each client sends and has acknowledged before
// the timer starts: enough to connect, fill the first batches and let every
// goroutine of client and broker run once.
const warmup = 2000

// BenchmarkPeers sends messages from one goroutine through every system as
// fast as its client accepts them; one op is one message. After the loop
// the benchmark waits until every message is acknowledged, so msgs/s counts
// acknowledged messages over the time from the first send to the last
// acknowledgement, while ns/op (the benchmark loop alone) is the time
// SendAsync and its peers took to accept a message, backpressure included.
//
// Latency is the time from just before a message is handed to the client to
// its acknowledgement callback (p50/p99/p999 in µs), taken for every
// -peers.sample-th message (default 16: reading the clock for every message
// costs two clock reads, about 80 ns, which alone took a third off the
// fastest client's throughput here). At full speed it is mostly time spent
// waiting in the client's window, about window/throughput (Little's law);
// -peers.rate paces the sender to compare latency at equal load instead.
//
// allocs/op and B/op count the whole process during the send loop: the
// in-process broker's allocations are part of them. cpu-ns/msg is the CPU
// time of the whole process, client and in-process broker, from the first
// send to the last acknowledgement, per message: what a message costs the
// machine, which varies less than the rate on a host whose speed does
// (compare it between builds of one client; a client whose broker runs
// elsewhere would not count the broker's share).
//
// b.Loop sizes a run from how fast sends were accepted at first; a client
// that buffers a lot before it pushes back (kgo: 50,000 records) gets a
// larger count and runs longer than -benchtime (franz-kfake at 16 KiB:
// about 12 s for 1s). The figures stay valid; -benchtime=Nx fixes the count.
func BenchmarkPeers(b *testing.B) {
	sizes, err := workload.ParseSizes(*sizesFlag)
	if err != nil {
		b.Fatal("-peers.sizes: ", err)
	}
	for _, sys := range systems {
		for _, size := range sizes {
			b.Run(fmt.Sprintf("%s/payload=%d", sys.name, size), func(b *testing.B) {
				runPeer(b, sys, size)
			})
		}
	}
}

func runPeer(b *testing.B, sys system, size int) {
	payloads := [][]byte{workload.Payload(size)}
	if *distinct {
		payloads = workload.Payloads(size, workload.PoolSize(size))
	}
	t := newTracker(*sampleFlag)
	c := sys.open(b, t)
	if err := warm(c, t, payloads); err != nil {
		b.Fatal(err)
	}

	cpu0, haveCPU := cpuclock.Process()
	t.arm()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	pace := pacer(*rateFlag)
	var n uint64
	for b.Loop() {
		pace(t.start, n)
		if err := t.sending(n); err != nil {
			b.Fatal(err)
		}
		i := int(n % uint64(len(payloads)))
		if err := c.send(i, payloads[i]); err != nil {
			b.Fatal(err)
		}
		n++
	}
	if err := drain(c, t, n); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(t.start)
	cpu1, _ := cpuclock.Process()

	b.ReportMetric(float64(n)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(micros(t.lat.Quantile(0.50)), "p50-µs")
	b.ReportMetric(micros(t.lat.Quantile(0.99)), "p99-µs")
	b.ReportMetric(micros(t.lat.Quantile(0.999)), "p999-µs")
	if haveCPU && n > 0 {
		b.ReportMetric(float64(cpu1-cpu0)/float64(n), "cpu-ns/msg")
	}
}

// warm has c prepare the run's payloads (if it is a preparer), sends the
// warm-up messages (the first payload) and waits for their
// acknowledgements.
func warm(c client, t *tracker, payloads [][]byte) error {
	if p, ok := c.(preparer); ok {
		p.prepare(payloads)
	}
	for range warmup {
		if err := c.send(0, payloads[0]); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	if err := drain(c, t, 0); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	return t.wait(&t.warm, warmup, 10*time.Second)
}

// drain flushes the client and waits until n timed messages are
// acknowledged.
func drain(c client, t *tracker, n uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.flush(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	return t.wait(&t.done, n, 10*time.Second)
}

// pacer returns a function that waits until message n is due at rate
// msgs/s, or one that never waits for rate 0. Sleeps last at least the
// timer's granularity (tens of µs to 1 ms here), so paced messages leave in
// small bursts; each burst catches up with the clock.
func pacer(rate int) func(start time.Time, n uint64) {
	if rate <= 0 {
		return func(time.Time, uint64) {}
	}
	interval := time.Second / time.Duration(rate)
	return func(start time.Time, n uint64) {
		due := time.Duration(n) * interval
		if ahead := due - time.Since(start); ahead > 0 {
			time.Sleep(ahead)
		}
	}
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
