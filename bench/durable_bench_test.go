package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/cpuclock"
	"github.com/inflightmq/inflight/metrics/hist"
	"github.com/inflightmq/inflight/server"
	"github.com/inflightmq/inflight/store/file"
	"github.com/inflightmq/inflight/transport/tcp"
)

// The receiving side's benchmarks: producers over tcp to a server whose
// broker stores into a file store in the test's temporary directory, beside
// the cost of the disk itself (BenchmarkDiskFsync and BenchmarkDiskWrite,
// the same directory). Run them in one command so that every row meets the
// same disk:
//
//	go test -run=NONE -bench='Disk|Durable|SlowStore' -benchtime=2s ./bench/

// BenchmarkDiskFsync: what the disk costs, without inflight: append n
// bytes to a file and fsync it, one op each, as a commit does. p50 and p99
// are the floor of a durable message's latency.
func BenchmarkDiskFsync(b *testing.B) {
	for _, size := range []int{128, 4 << 10} {
		b.Run(fmt.Sprintf("write=%d", size), func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "raw"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			buf := make([]byte, size)
			var h hist.Histogram
			for b.Loop() {
				start := time.Now()
				if _, err := f.Write(buf); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
				h.Record(time.Since(start))
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "fsyncs/s")
			reportLatency(b, &h)
		})
	}
}

// BenchmarkDiskWrite: what a write costs without fsync, without inflight:
// append 512 KiB to a file, one op each, as an Append of a few frames under
// FsyncNone does, in files of 256 MiB of which it keeps the last 8, as a
// store rolls segments and retention removes them (so that a long run does
// not fill the disk). cpu-ns/KiB is what the kernel spends to take the
// bytes into the page cache, which a store pays on top of its own work
// when nothing is fsynced. It depends on what ran before; on a virtual
// machine, likely on how much of the guest's memory the host has to hand
// over afresh.
func BenchmarkDiskWrite(b *testing.B) {
	const size, perFile, keep = 512 << 10, 256 << 20, 8
	dir := b.TempDir()
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	buf := make([]byte, size)
	b.SetBytes(size)
	cpu0, haveCPU := cpuclock.Process()
	written := int64(0)
	for b.Loop() {
		if written%perFile == 0 {
			if len(files) == keep {
				files[0].Close()
				if err := os.Remove(files[0].Name()); err != nil {
					b.Fatal(err)
				}
				files = files[1:]
			}
			f, err := os.Create(filepath.Join(dir, fmt.Sprint("raw", written/perFile)))
			if err != nil {
				b.Fatal(err)
			}
			files = append(files, f)
		}
		if _, err := files[len(files)-1].Write(buf); err != nil {
			b.Fatal(err)
		}
		written += size
	}
	if cpu1, ok := cpuclock.Process(); ok && haveCPU {
		b.ReportMetric(float64(cpu1-cpu0)/float64(written>>10), "cpu-ns/KiB")
	}
}

// durableEnv is a server on 127.0.0.1 whose broker stores into a file
// store, and a tcp dialer to it.
type durableEnv struct {
	store  *file.Store
	policy file.FsyncPolicy
	broker *broker.Broker
	dialer *tcp.Dialer
}

// openDurable starts a durableEnv with a file store under policy, the
// broker's store wrapped by wrap (if not nil); everything stops when b ends.
func openDurable(b *testing.B, policy file.FsyncPolicy, wrap func(broker.Store) broker.Store) *durableEnv {
	b.Helper()
	s, err := file.Open(filepath.Join(b.TempDir(), "store"), file.Fsync(policy))
	if err != nil {
		b.Fatal(err)
	}
	var st broker.Store = s
	if wrap != nil {
		st = wrap(s)
	}
	br, err := broker.New(st)
	if err != nil {
		b.Fatal(err)
	}
	srv, err := server.New("127.0.0.1:0", br)
	if err != nil {
		b.Fatal(err)
	}
	d, err := tcp.NewDialer(srv.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		d.Close()
		srv.Close(context.Background())
		s.Close()
	})
	return &durableEnv{store: s, policy: policy, broker: br, dialer: d}
}

// producer returns a connected producer named name, closed when b ends.
func (e *durableEnv) producer(b *testing.B, name string, opts ...core.Option) *core.Producer {
	b.Helper()
	p, err := core.New(e.dialer, append([]core.Option{core.Name(name)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close(context.Background()) })
	if _, err := p.Send(context.Background(), &core.Message{Payload: []byte("connect")}); err != nil {
		b.Fatal(err)
	}
	return p
}

// reportStore reports records per frame since before, and under
// FsyncBatch records per fsync (a commit).
func (e *durableEnv) reportStore(b *testing.B, before file.Stats, frames0 uint64) {
	st := e.store.Stats()
	if syncs := st.Syncs - before.Syncs; syncs > 0 && e.policy == file.FsyncBatch {
		b.ReportMetric(float64(st.Records-before.Records)/float64(syncs), "records/fsync")
	}
	if frames := e.broker.Stats().Batches - frames0; frames > 0 {
		b.ReportMetric(float64(st.Records-before.Records)/float64(frames), "records/frame")
	}
}

// BenchmarkDurable: one producer, 100 B, over tcp to a file store, with
// every record fsynced before its receipt (batch) or left to the page
// cache (none), offered at a fixed rate (every message timed, one op is
// one message: -benchtime=2s runs about 2 s) or as fast as it goes (rate=max,
// a sample of messages timed). Durable should cost what the disk sets:
// compare the latency with BenchmarkDiskFsync's.
func BenchmarkDurable(b *testing.B) {
	for _, rate := range []int{5_000, 20_000, 100_000, 0} {
		for _, policy := range []file.FsyncPolicy{file.FsyncBatch, file.FsyncNone} {
			r := "max"
			if rate > 0 {
				r = fmt.Sprint(rate)
			}
			b.Run(fmt.Sprintf("rate=%s/fsync=%s", r, policy), func(b *testing.B) {
				e := openDurable(b, policy, nil)
				p := e.producer(b, "durable")
				before, frames0 := e.store.Stats(), e.broker.Stats().Batches
				if rate > 0 {
					h := paced(b, p, rate)
					reportLatency(b, h)
				} else {
					unpaced(b, p)
				}
				e.reportStore(b, before, frames0)
			})
		}
	}
}

// BenchmarkDurableProducers: 1, 4 and 16 producers, each on its own
// connection, as fast as they go, every record fsynced before its receipt.
// The commits of their Appends are shared, so the total should not fall as
// producers are added; records/fsync says how much one fsync carries.
func BenchmarkDurableProducers(b *testing.B) {
	for _, n := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("producers=%d", n), func(b *testing.B) {
			e := openDurable(b, file.FsyncBatch, nil)
			runProducers(b, e, n)
		})
	}
}

// slowStore makes every Append take at least delay: a store behind a
// network round trip, such as a replicated stream.
type slowStore struct {
	broker.Store
	delay time.Duration
}

func (s slowStore) Append(topic, producer string, epoch uint64, recs []broker.Record) error {
	time.Sleep(s.delay)
	return s.Store.Append(topic, producer, epoch, recs)
}

// slowFrames is a slowStore over a store that takes frames
// (broker.FrameAppender, as file stores do): AppendFrames takes the delay
// too.
type slowFrames struct{ slowStore }

func (s slowFrames) AppendFrames(topic, producer string, epoch uint64, frames []broker.Frame) error {
	time.Sleep(s.delay)
	return s.Store.(broker.FrameAppender).AppendFrames(topic, producer, epoch, frames)
}

// slow wraps s so that every Append, and AppendFrames if s has it, takes
// at least delay.
func slow(s broker.Store, delay time.Duration) broker.Store {
	if _, ok := s.(broker.FrameAppender); ok {
		return slowFrames{slowStore{s, delay}}
	}
	return slowStore{s, delay}
}

// BenchmarkSlowStore: a store whose every Append (AppendFrames) takes 5 ms (under
// FsyncNone, so that the delay is all of it), 1 and 32 producers. Appends
// of different producers run concurrently: 32 producers should get far
// more than one.
func BenchmarkSlowStore(b *testing.B) {
	for _, n := range []int{1, 32} {
		b.Run(fmt.Sprintf("append=5ms/producers=%d", n), func(b *testing.B) {
			e := openDurable(b, file.FsyncNone, func(s broker.Store) broker.Store { return slow(s, 5*time.Millisecond) })
			runProducers(b, e, n)
		})
	}
}

// runProducers sends about b.N messages of 100 B (max(b.N/n, 1) from each)
// from n producers at once and reports the total rate and the process's
// CPU per message: user and system time of all its threads (producers,
// server, broker, store, the garbage collector, and the kernel's work in
// their system calls), not the kernel's writeback threads.
func runProducers(b *testing.B, e *durableEnv, n int) {
	ps := make([]*core.Producer, n)
	for i := range ps {
		ps[i] = e.producer(b, fmt.Sprint("p", i))
	}
	msgs := messages(poolSize(100), 100)
	cb := func(_ core.MessageID, _ *core.Message, err error) {
		if err != nil {
			b.Error(err)
		}
	}
	before, frames0 := e.store.Stats(), e.broker.Stats().Batches
	per := max(b.N/n, 1)
	b.SetBytes(100)
	b.ReportAllocs()
	cpu0, haveCPU := cpuclock.Process()
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() {
			for i := range per {
				if err := p.SendAsync(context.Background(), msgs[i%len(msgs)], cb); err != nil {
					b.Error(err)
					return
				}
			}
			if err := p.Flush(context.Background()); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(per*n)/b.Elapsed().Seconds(), "msgs/s")
	if cpu1, ok := cpuclock.Process(); ok && haveCPU {
		// With the rate: how many of the host's cores the run kept busy.
		b.ReportMetric(float64(cpu1-cpu0)/float64(per*n), "cpu-ns/msg")
	}
	e.reportStore(b, before, frames0)
}

// unpaced sends b.N messages of 100 B from p as fast as it takes them, one
// goroutine, waits for every callback and reports the rate and a sample's
// latency.
func unpaced(b *testing.B, p *core.Producer) {
	l := newLoad(p, 1, 100)
	b.SetBytes(100)
	b.ReportAllocs()
	l.start = time.Now()
	b.ResetTimer()
	l.send(b, 0, b.N)
	if err := p.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	l.report(b, b.N, b.Elapsed())
}

// reportLatency reports a histogram's percentiles.
func reportLatency(b *testing.B, h *hist.Histogram) {
	b.ReportMetric(float64(h.Quantile(0.50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(h.Quantile(0.99).Microseconds()), "p99-µs")
	b.ReportMetric(float64(h.Quantile(0.999).Microseconds()), "p999-µs")
}

// BenchmarkWindow: the producer's window (core.MaxFramesInFlight) against
// a broker that answers at once (the memory store), one that fsyncs every
// commit (at 20k msgs/s and unpaced), and one whose Appends take 5 ms;
// one producer of 100 B over tcp. What the default is chosen by.
func BenchmarkWindow(b *testing.B) {
	type broker_ struct {
		name   string
		policy file.FsyncPolicy
		wrap   func(broker.Store) broker.Store
		rate   int
	}
	cases := []broker_{
		{"none", file.FsyncNone, nil, 0},
		{"fsync/rate=20000", file.FsyncBatch, nil, 20_000},
		{"fsync", file.FsyncBatch, nil, 0},
		{"append=5ms", file.FsyncNone, func(s broker.Store) broker.Store { return slow(s, 5*time.Millisecond) }, 0},
	}
	for _, c := range cases {
		for _, w := range []int{1, 2, 4, 8, 16} {
			b.Run(fmt.Sprintf("%s/window=%d", c.name, w), func(b *testing.B) {
				e := openDurable(b, c.policy, c.wrap)
				p := e.producer(b, "window", core.MaxFramesInFlight(w))
				before, frames0 := e.store.Stats(), e.broker.Stats().Batches
				if c.rate > 0 {
					reportLatency(b, paced(b, p, c.rate))
				} else {
					unpaced(b, p)
				}
				e.reportStore(b, before, frames0)
			})
		}
	}
}
