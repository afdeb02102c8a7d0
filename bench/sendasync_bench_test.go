package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/transport/mem"
	"github.com/inflightmq/inflight/transport/tcp"
)

// fixture is a broker reachable through one transport.
type fixture struct {
	dialer transport.Dialer
	close  func()
}

func memFixture(b *testing.B) fixture {
	br, _ := broker.New(broker.NewCountingStore())
	d := mem.NewDialer(br)
	return fixture{dialer: d, close: func() { d.Close() }}
}

func tcpFixture(b *testing.B) fixture {
	br, _ := broker.New(broker.NewCountingStore())
	srv, err := tcp.NewServer("127.0.0.1:0", br)
	if err != nil {
		b.Fatal(err)
	}
	d, err := tcp.NewDialer(srv.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	return fixture{dialer: d, close: func() {
		d.Close()
		srv.Close(context.Background())
	}}
}

var transports = []struct {
	name string
	new  func(*testing.B) fixture
}{{"mem", memFixture}, {"tcp", tcpFixture}}

// BenchmarkSendAsync measures SendAsync to callback, the broker storing
// (counting) every record. One op is one message; msgs/s counts callbacks.
func BenchmarkSendAsync(b *testing.B) {
	for _, tr := range transports {
		for _, size := range []int{100, 1024, 16 << 10} {
			b.Run(fmt.Sprintf("%s/payload=%d", tr.name, size), func(b *testing.B) {
				f := tr.new(b)
				defer f.close()
				p, err := core.New(f.dialer, core.Name("bench"))
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
				if _, err := p.Send(ctx, msg); err != nil { // connect
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
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
				if failed.Load() != 0 {
					b.Fatalf("%d messages failed", failed.Load())
				}
			})
		}
	}
}
