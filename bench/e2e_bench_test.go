package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/loopback"
	"github.com/inflightmq/inflight/metrics/hist"
	"github.com/inflightmq/inflight/wire"
)

// open starts a loopback broker over transport name, stopped when b ends.
func open(b *testing.B, name string) *loopback.Env {
	env, err := loopback.Open(name)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(env.Close)
	return env
}

// sampleEvery is how often a message's send time is taken for the latency
// percentiles: reading the clock for every message would cost more than
// the producer spends on it.
const sampleEvery = 64

// load drives one producer from several goroutines and measures it.
// Every sampleEvery-th send uses a sample message instead of a regular one:
// its payload starts with 0xff and its sample number, which is how the
// callback finds its send time without a lookup per message.
type load struct {
	p       *core.Producer
	cb      core.Callback
	msgs    [][]*core.Message // per sender, regular messages
	samples [][]*core.Message // per sender, sample messages
	sentAt  [][]int64         // per sender, per sample: ns since start
	start   time.Time
	lat     hist.Histogram // callbacks run on one goroutine: no lock
	failed  atomic.Int64
	calls   atomic.Int64
}

func newLoad(p *core.Producer, senders, size int) *load {
	l := &load{p: p}
	l.cb = l.callback // one method value, not one per send
	pool := poolSize(size)
	for s := range senders {
		l.msgs = append(l.msgs, messages(pool, size))
		// Enough samples that none is reused while still pending.
		samples := messages(core.DefaultMaxPending/sampleEvery+2, size)
		for i, m := range samples {
			m.Payload[0], m.Payload[1], m.Payload[2] = 0xff, byte(s), byte(i>>8)
			m.Payload[3] = byte(i)
		}
		l.samples = append(l.samples, samples)
		l.sentAt = append(l.sentAt, make([]int64, len(samples)))
	}
	return l
}

func (l *load) callback(_ core.MessageID, m *core.Message, err error) {
	l.calls.Add(1)
	if err != nil {
		l.failed.Add(1)
		return
	}
	if p := m.Payload; p[0] == 0xff {
		at := atomic.LoadInt64(&l.sentAt[p[1]][int(p[2])<<8|int(p[3])])
		l.lat.Record(time.Since(l.start) - time.Duration(at))
	}
}

// send sends n messages from sender s.
func (l *load) send(b *testing.B, s, n int) {
	msgs, samples, sentAt := l.msgs[s], l.samples[s], l.sentAt[s]
	ctx := context.Background()
	for i := range n {
		m := msgs[i%len(msgs)]
		if i%sampleEvery == 0 {
			k := i / sampleEvery % len(samples)
			m = samples[k]
			atomic.StoreInt64(&sentAt[k], int64(time.Since(l.start)))
		}
		if err := l.p.SendAsync(ctx, m, l.cb); err != nil {
			b.Error(err)
			return
		}
	}
}

func (l *load) report(b *testing.B, n int, elapsed time.Duration) {
	b.ReportMetric(float64(n)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(l.lat.Quantile(0.50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(l.lat.Quantile(0.99).Microseconds()), "p99-µs")
	b.ReportMetric(float64(l.lat.Quantile(0.999).Microseconds()), "p999-µs")
	st := l.p.Stats()
	b.ReportMetric(st.CompressionRatio(), "ratio")
	if f := l.failed.Load(); f != 0 {
		b.Fatalf("%d messages failed", f)
	}
}

// BenchmarkEndToEnd: SendAsync to callback with the broker storing
// (counting) every record, over every transport x payload x codec x number
// of senders. One op is one message.
func BenchmarkEndToEnd(b *testing.B) {
	codecs := []struct {
		name  string
		codec wire.Codec
	}{{"none", wire.CodecNone}, {"s2", wire.CodecS2}, {"zstd", wire.CodecZstd}}
	for _, tr := range loopback.Transports {
		for _, size := range []int{100, 1 << 10, 16 << 10, 64 << 10} {
			for _, c := range codecs {
				for _, senders := range []int{1, 8} {
					name := fmt.Sprintf("%s/payload=%d/codec=%s/senders=%d", tr, size, c.name, senders)
					b.Run(name, func(b *testing.B) {
						env := open(b, tr)
						p, err := core.New(env.Dialer, core.Name("bench"), core.Compression(c.codec, wire.LevelFastest))
						if err != nil {
							b.Fatal(err)
						}
						defer p.Close(context.Background())
						l := newLoad(p, senders, size)
						if _, err := p.Send(context.Background(), l.msgs[0][0]); err != nil { // connect
							b.Fatal(err)
						}
						b.SetBytes(int64(size))
						b.ReportAllocs()
						l.start = time.Now()
						b.ResetTimer()
						var wg sync.WaitGroup
						per := max(b.N/senders, 1)
						for s := range senders {
							wg.Go(func() { l.send(b, s, per) })
						}
						wg.Wait()
						if err := p.Flush(context.Background()); err != nil {
							b.Fatal(err)
						}
						b.StopTimer()
						l.report(b, per*senders, b.Elapsed())
					})
				}
			}
		}
	}
}

// BenchmarkChurn: one sender at full speed while every connection is cut
// every 100 ms. Reports throughput under churn and checks that every
// message got its callback.
func BenchmarkChurn(b *testing.B) {
	for _, tr := range loopback.Transports {
		b.Run(tr+"/payload=100", func(b *testing.B) {
			env := open(b, tr)
			p, err := core.New(env.Dialer, core.Name("churn"), core.SendTimeout(time.Minute),
				core.ReconnectBackoff(time.Millisecond, 10*time.Millisecond))
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close(context.Background())
			l := newLoad(p, 1, 100)
			if _, err := p.Send(context.Background(), l.msgs[0][0]); err != nil {
				b.Fatal(err)
			}
			stop := make(chan struct{})
			var cutter sync.WaitGroup
			cutter.Go(func() {
				t := time.NewTicker(100 * time.Millisecond)
				defer t.Stop()
				for {
					select {
					case <-t.C:
						env.Cut()
					case <-stop:
						return
					}
				}
			})
			before := p.Stats()
			b.SetBytes(100)
			b.ReportAllocs()
			l.start = time.Now()
			b.ResetTimer()
			l.send(b, 0, b.N)
			if err := p.Flush(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			close(stop)
			cutter.Wait()
			if got := l.calls.Load(); got != int64(b.N) {
				b.Fatalf("%d callbacks for %d messages", got, b.N)
			}
			b.ReportMetric(float64(l.calls.Load()), "callbacks")
			b.ReportMetric(float64(p.Stats().Reconnects-before.Reconnects), "reconnects")
			l.report(b, b.N, b.Elapsed())
		})
	}
}

// BenchmarkFixedRate offers 100 000 msgs/s (paced, 100 B) and reports the
// send-to-callback latency at that rate rather than at saturation. Every
// message is timed. One op is one message, so -benchtime=300000x is 3 s.
func BenchmarkFixedRate(b *testing.B) {
	const rate = 100_000
	for _, tr := range loopback.Transports {
		b.Run(tr+"/rate=100k/payload=100", func(b *testing.B) {
			env := open(b, tr)
			p, err := core.New(env.Dialer, core.Name("rate"))
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close(context.Background())
			if _, err := p.Send(context.Background(), &core.Message{Payload: []byte("connect")}); err != nil {
				b.Fatal(err)
			}
			reportLatency(b, paced(b, p, rate))
		})
	}
}

// paced sends b.N messages of 100 B from p at rate messages per second
// (one op is one message), waits for every callback, reports the rate
// achieved, and returns the send-to-callback latency of every message. It
// fails the benchmark if a message fails.
func paced(b *testing.B, p *core.Producer, rate int) *hist.Histogram {
	msgs := messages(poolSize(100), 100)
	sentAt := make([]int64, len(msgs))
	index := make(map[*core.Message]int, len(msgs))
	for i, m := range msgs {
		index[m] = i
	}
	h := new(hist.Histogram) // callbacks run on one goroutine: no lock
	var failed atomic.Int64
	start := time.Now()
	cb := func(_ core.MessageID, m *core.Message, err error) {
		if err != nil {
			failed.Add(1)
			return
		}
		h.Record(time.Since(start) - time.Duration(atomic.LoadInt64(&sentAt[index[m]])))
	}
	b.ReportAllocs()
	b.ResetTimer()
	start = time.Now()
	i := 0
	for b.Loop() {
		due := time.Duration(i) * time.Second / time.Duration(rate)
		if wait := due - time.Since(start); wait > 0 {
			time.Sleep(wait)
		}
		k := i % len(msgs)
		atomic.StoreInt64(&sentAt[k], int64(time.Since(start)))
		if err := p.SendAsync(context.Background(), msgs[k], cb); err != nil {
			b.Fatal(err)
		}
		i++
	}
	if err := p.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "msgs/s")
	if f := failed.Load(); f != 0 {
		b.Fatalf("%d messages failed", f)
	}
	return h
}
