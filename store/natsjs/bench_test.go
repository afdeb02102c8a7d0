package natsjs_test

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/metrics/hist"
	"github.com/inflightmq/inflight/server"
	"github.com/inflightmq/inflight/store/natsjs"
	"github.com/inflightmq/inflight/store/natsjs/natsjstest"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/transport/mem"
	"github.com/inflightmq/inflight/transport/tcp"
)

// BenchmarkEmbedded: producers -> mem transport -> broker -> natsjs store ->
// JetStream cluster, all in this process (the embedded mode; the servers
// share the CPUs with the producers). One op is one 100-byte record; the
// metrics are records/s and the p50/p99 time from SendAsync to its
// callback (every 64th record timed). Each case runs twice: as fast as the
// producers can send, then paced at half the rate that reached
// (".../paced-half"). Beside them, in the same run, the server's own fast
// batch publish (engine-fast-batch, see benchEngineFast).
//
//	go test -run '^$' -bench Embedded -benchtime 200000x
func BenchmarkEmbedded(b *testing.B) {
	benchCases(b, false, []benchCase{
		{"native/R1", natsjs.LayoutNative, 1, false},
		{"native/R3", natsjs.LayoutNative, 3, false},
		{"native-atomic/R1", natsjs.LayoutNative, 1, true}, // atomic batches where fast ones would do
		{"packed/R1", natsjs.LayoutPacked, 1, false},
	})
}

// BenchmarkGateway: as BenchmarkEmbedded, but the producers write over TCP
// (127.0.0.1) to a gateway: a broker on the store behind the TCP server,
// still in this process.
//
//	go test -run '^$' -bench Gateway -benchtime 200000x
func BenchmarkGateway(b *testing.B) {
	benchCases(b, true, []benchCase{
		{"native/R1", natsjs.LayoutNative, 1, false},
		{"native/R3", natsjs.LayoutNative, 3, false},
	})
}

// benchPaced: run the paced cases too (-bench.paced=false leaves them out,
// e.g. for a CPU profile of the full-speed case alone).
var benchPaced = flag.Bool("bench.paced", true, "run the paced-half cases of BenchmarkEmbedded and BenchmarkGateway")

type benchCase struct {
	name     string
	layout   natsjs.Layout
	replicas int
	atomic   bool // atomic batches even on R1 (natsjs.NoFastBatch)
}

func benchCases(b *testing.B, viaTCP bool, cases []benchCase) {
	// The engine's own fast batch publisher on the same kind of cluster,
	// in the same run, for comparison: 100-byte messages without headers
	// (what `nats bench js pub fast` measures), and messages shaped as
	// native records (their headers; their headers and fence check).
	for _, ec := range []struct {
		name     string
		replicas int
		shape    msgShape
	}{
		{"engine-fast-batch/R1", 1, shapeNone},
		{"engine-fast-batch/R3", 3, shapeNone},
		{"engine-fast-batch-native-headers/R1", 1, shapeHeaders},
		{"engine-fast-batch-native-checked/R1", 1, shapeChecked},
	} {
		withCluster(b, ec.replicas, func(c func(b *testing.B) *natsjstest.Cluster) {
			b.Run(ec.name, func(b *testing.B) { benchEngineFast(b, c(b), ec.replicas, ec.shape) })
		})
	}
	for _, tc := range cases {
		for _, producers := range []int{1, 4} {
			// A fresh cluster for each case (kept across the function's
			// calls with growing b.N), so no case pays for the last one's
			// flushing and compaction.
			withCluster(b, tc.replicas, func(c func(b *testing.B) *natsjstest.Cluster) {
				cfg := natsjs.Config{Layout: tc.layout}
				if tc.atomic {
					cfg = natsjs.NoFastBatch(cfg)
				}
				name := fmt.Sprintf("%s/producers=%d", tc.name, producers)
				var rate float64
				b.Run(name, func(b *testing.B) { rate = benchLoadRun(b, c(b), cfg, producers, viaTCP, 0) })
				if rate > 0 && *benchPaced {
					b.Run(name+"/paced-half", func(b *testing.B) { benchLoadRun(b, c(b), cfg, producers, viaTCP, rate/2) })
				}
			})
		}
	}
}

// withCluster runs fn with a function that returns a cluster of replicas
// servers with the test stream, started at its first call and shut down
// when fn returns.
func withCluster(b *testing.B, replicas int, fn func(c func(b *testing.B) *natsjstest.Cluster)) {
	dir, err := os.MkdirTemp("", "natsjs-bench")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var c *natsjstest.Cluster
	defer func() {
		if c != nil {
			c.Shutdown()
		}
	}()
	fn(func(b *testing.B) *natsjstest.Cluster {
		if c == nil {
			if c, err = natsjstest.Start(dir, replicas, natsjstest.Options{}); err != nil {
				b.Fatal(err)
			}
			ensureStream(b, c, natsjs.StreamConfig{Replicas: replicas})
		}
		return c
	})
}

// benchRun numbers the producer names so that no run resumes another's.
var benchRun atomic.Int64

// benchLoadRun sends b.N records from producers through a broker on a
// store of cfg, as fast as they go, or paced at rate records/s in all, and
// returns the records/s that reached.
func benchLoadRun(b *testing.B, c *natsjstest.Cluster, cfg natsjs.Config, producers int, viaTCP bool, rate float64) float64 {
	br, _ := gateway(b, c, cfg, nil)
	var d transport.Dialer
	if viaTCP {
		srv, err := server.New("127.0.0.1:0", br)
		if err != nil {
			b.Fatal(err)
		}
		defer srv.Close(context.Background())
		td, err := tcp.NewDialer(srv.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer td.Close()
		d = td
	} else {
		md := mem.NewDialer(br)
		defer md.Close()
		d = md
	}
	loads := make([]*benchLoad, producers)
	for i := range loads {
		p := newProducer(b, d, fmt.Sprintf("bench-%d-%d", benchRun.Add(1), i), core.SendTimeout(time.Minute))
		loads[i] = newBenchLoad(p)
	}
	per := b.N / producers
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for _, ld := range loads {
		ld.start, ld.rate = start, rate/float64(producers)
		wg.Go(func() { ld.send(b, per) })
	}
	wg.Wait()
	for _, ld := range loads {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if err := ld.p.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		cancel()
	}
	elapsed := time.Since(start)
	b.StopTimer()
	var lat hist.Histogram
	for _, ld := range loads {
		closeProducer(b, ld.p)
		if f := ld.failed.Load(); f > 0 {
			b.Fatalf("%d records failed", f)
		}
		lat.Merge(&ld.lat)
	}
	got := float64(per*producers) / elapsed.Seconds()
	b.ReportMetric(got, "records/s")
	b.ReportMetric(float64(lat.Quantile(0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat.Quantile(0.99).Microseconds())/1000, "p99-ms")
	return got
}

// benchLoad drives one producer from one goroutine. Its payloads come from
// a pool larger than the producer's window, so none is reused while
// pending; a payload starts with its pool index, which the callback uses to
// find a timed record's send time.
type benchLoad struct {
	p      *core.Producer
	cb     core.Callback
	msgs   []core.Message
	sentAt []atomic.Int64 // per pool index: ns since start (timed records only)
	start  time.Time
	rate   float64        // records/s to send at; 0: as fast as SendAsync takes them
	lat    hist.Histogram // callbacks run on the producer's one dispatcher
	failed atomic.Int64
}

const (
	benchPool  = 2 * core.DefaultMaxPending
	timedEvery = 64
)

func newBenchLoad(p *core.Producer) *benchLoad {
	l := &benchLoad{p: p, msgs: make([]core.Message, benchPool), sentAt: make([]atomic.Int64, benchPool)}
	for i := range l.msgs {
		l.msgs[i].Payload = make([]byte, 100)
		binary.BigEndian.PutUint32(l.msgs[i].Payload, uint32(i))
	}
	l.cb = l.callback
	return l
}

func (l *benchLoad) callback(_ core.MessageID, m *core.Message, err error) {
	if err != nil {
		l.failed.Add(1)
		return
	}
	if i := binary.BigEndian.Uint32(m.Payload); i%timedEvery == 0 {
		l.lat.Record(time.Since(l.start) - time.Duration(l.sentAt[i].Load()))
	}
}

func (l *benchLoad) send(b *testing.B, n int) {
	ctx := context.Background()
	for k := range n {
		if l.rate > 0 {
			// Record k is due k/rate after the start.
			if ahead := time.Duration(float64(k)/l.rate*float64(time.Second)) - time.Since(l.start); ahead > 0 {
				time.Sleep(ahead)
			}
		}
		i := k % benchPool
		if i%timedEvery == 0 {
			l.sentAt[i].Store(int64(time.Since(l.start)))
		}
		if err := l.p.SendAsync(ctx, &l.msgs[i], l.cb); err != nil {
			b.Error(err)
			return
		}
	}
}
