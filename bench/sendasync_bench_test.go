package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/cpuclock"
	"github.com/inflightmq/inflight/internal/loopback"
	"github.com/inflightmq/inflight/wire"
)

// run measures SendAsync to callback from one goroutine: one op is one
// message; msgs/s counts callbacks (the broker stored, or counted, each
// record); ratio is raw batch bytes over bytes on the wire; cpu-ns/msg is
// the CPU time (user and system) the whole process spent per message,
// producer and broker together, from the first SendAsync to the end of
// Flush (Unix only). On a shared host it varies less from run to run than
// ns/op, which also counts the time the process waited for a CPU: compare
// it between binaries run in turn, in one run.
func run(b *testing.B, env *loopback.Env, msgs []*core.Message, opts ...core.Option) {
	runBatch(b, env, msgs, 0, opts...)
}

// runBatch is run with SendBatch of batch messages per call instead of
// SendAsync (batch 0: SendAsync). One op is still one message; msgs must
// hold a multiple of batch.
func runBatch(b *testing.B, env *loopback.Env, msgs []*core.Message, batch int, opts ...core.Option) {
	p, err := core.New(env.Dialer, append([]core.Option{core.Name("bench")}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(context.Background())
	var failed atomic.Int64
	cb := func(_ core.MessageID, _ *core.Message, err error) {
		if err != nil {
			failed.Add(1)
		}
	}
	ctx := context.Background()
	if _, err := p.Send(ctx, msgs[0]); err != nil { // connect
		b.Fatal(err)
	}
	before := p.Stats()
	b.SetBytes(int64(len(msgs[0].Payload)))
	b.ReportAllocs()
	cpu0, haveCPU := cpuclock.Process()
	start := time.Now()
	if batch > 0 {
		for i := 0; i < b.N; i += batch {
			at := i % len(msgs)
			run := msgs[at : at+min(batch, b.N-i)]
			if n, err := p.SendBatch(ctx, run, cb); err != nil || n != len(run) {
				b.Fatal(n, err)
			}
		}
	} else {
		i := 0
		for b.Loop() {
			if err := p.SendAsync(ctx, msgs[i%len(msgs)], cb); err != nil {
				b.Fatal(err)
			}
			i++
		}
	}
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
	if cpu1, ok := cpuclock.Process(); ok && haveCPU {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/msg")
	}
	st := p.Stats()
	if wireBytes := st.BytesWire - before.BytesWire; wireBytes > 0 {
		b.ReportMetric(float64(st.BytesRaw-before.BytesRaw)/float64(wireBytes), "ratio")
		b.ReportMetric(float64(st.Sent-before.Sent)/float64(st.Batches-before.Batches), "msgs/batch")
	}
	if failed.Load() != 0 {
		b.Fatalf("%d messages failed", failed.Load())
	}
}

// BenchmarkSendAsync: every transport, no compression, natural batching.
func BenchmarkSendAsync(b *testing.B) {
	for _, tr := range loopback.Transports {
		for _, size := range []int{100, 1024, 16 << 10} {
			b.Run(fmt.Sprintf("%s/payload=%d", tr, size), func(b *testing.B) {
				run(b, open(b, tr), messages(poolSize(size), size))
			})
		}
		// The same 100 B payloads with a 16-byte key and two small headers.
		b.Run(fmt.Sprintf("%s/payload=100,key=16,headers=2", tr), func(b *testing.B) {
			run(b, open(b, tr), withMeta(messages(poolSize(100), 100)))
		})
	}
}

// BenchmarkSendBatch is BenchmarkSendAsync/mem and /tcp at 100 B and 1 KiB
// with SendBatch of 64 messages per call.
func BenchmarkSendBatch(b *testing.B) {
	for _, tr := range []string{"mem", "tcp"} {
		for _, size := range []int{100, 1024} {
			b.Run(fmt.Sprintf("%s/payload=%d", tr, size), func(b *testing.B) {
				runBatch(b, open(b, tr), messages(poolSize(size), size), 64)
			})
		}
	}
}

// withMeta gives each message a distinct 16-byte key and two small headers
// (a trace id and a source), as a traced application would.
func withMeta(msgs []*core.Message) []*core.Message {
	for i, m := range msgs {
		m.Key = fmt.Appendf(nil, "user-%011d", i)
		m.Headers = []core.Header{
			{Key: "trace-id", Value: fmt.Appendf(nil, "%016x", uint64(i)*0x9e3779b97f4a7c15)},
			{Key: "source", Value: []byte("eu-west-1")},
		}
	}
	return msgs
}

// BenchmarkCodecs: over mem, every codec x batch size x payload size.
func BenchmarkCodecs(b *testing.B) {
	codecs := []struct {
		name  string
		codec wire.Codec
		level wire.Level
	}{
		{"none", wire.CodecNone, wire.LevelFastest},
		{"s2", wire.CodecS2, wire.LevelDefault},
		{"snappy", wire.CodecSnappy, wire.LevelDefault},
		{"zstd-fastest", wire.CodecZstd, wire.LevelFastest},
		{"zstd-default", wire.CodecZstd, wire.LevelDefault},
	}
	for _, c := range codecs {
		for _, batch := range []int{256, 4096} {
			for _, size := range []int{100, 1024, 16 << 10} {
				b.Run(fmt.Sprintf("%s/batch=%d/payload=%d", c.name, batch, size), func(b *testing.B) {
					run(b, open(b, "mem"), messages(poolSize(size), size),
						core.Compression(c.codec, c.level), core.MaxBatchMessages(batch))
				})
			}
		}
	}
}

// poolSize is how many distinct messages a benchmark cycles through: more
// than a batch holds, so that compression never sees a batch repeat itself,
// within 64 MiB of payload.
func poolSize(size int) int { return min(max(64<<20/size, 1024), 16384) }
