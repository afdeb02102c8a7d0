package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/transport/mem"
)

// BenchmarkSendAsyncMem measures SendAsync to callback over the in-memory
// transport, with the broker storing (counting) every record. One op is one
// message; msgs/s counts callbacks.
func BenchmarkSendAsyncMem(b *testing.B) {
	for _, size := range []int{100, 1024, 16 << 10} {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) {
			store := broker.NewCountingStore()
			br, _ := broker.New(store)
			d := mem.NewDialer(br)
			defer d.Close()
			p, err := core.New(d, core.Name("bench"))
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close(context.Background())
			msg := &core.Message{Payload: make([]byte, size)}
			var failed atomic.Int64
			cb := func(_ core.MessageID, _ *core.Message, err error) {
				if err != nil {
					failed.Add(1)
				}
			}
			ctx := context.Background()
			// Warm up: connect.
			if _, err := p.Send(ctx, msg); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				if err := p.SendAsync(ctx, msg, cb); err != nil {
					b.Fatal(err)
				}
			}
			if err := p.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			elapsed := time.Since(start)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
			if failed.Load() != 0 {
				b.Fatalf("%d messages failed", failed.Load())
			}
		})
	}
}
