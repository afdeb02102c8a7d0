package bench

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// BenchmarkLoopback is the machine's own limit for what inflight's tcp
// path does: a plain Go writer and reader over one loopback TCP connection
// (127.0.0.1), no framing, no copies beyond the kernel's. One op is one
// write of the given size; MB/s counts the writes, GB/s-read the bytes the
// reader received by the time it read the last one. Beside SendAsync/tcp/payload=1024 and
// payload=16384 it says how close to the loopback the producer runs.
func BenchmarkLoopback(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("write=%d", size), func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			type result struct {
				n   int64
				err error
			}
			read := make(chan result, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					read <- result{0, err}
					return
				}
				defer c.Close()
				n, err := io.CopyBuffer(io.Discard, c, make([]byte, 1<<20))
				read <- result{n, err}
			}()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			var written int64
			start := time.Now()
			for b.Loop() {
				n, err := c.Write(buf)
				written += int64(n)
				if err != nil {
					b.Fatal(err)
				}
			}
			if err := c.Close(); err != nil { // the reader sees EOF once it read everything
				b.Fatal(err)
			}
			select {
			case r := <-read:
				if r.err != nil && !errors.Is(r.err, net.ErrClosed) {
					b.Fatal(r.err)
				}
				if r.n != written {
					b.Fatalf("read %d bytes of %d", r.n, written)
				}
			case <-time.After(time.Minute):
				b.Fatal("the reader did not finish within a minute")
			}
			// MB/s times the writes; this, the whole transfer.
			b.ReportMetric(float64(written)/time.Since(start).Seconds()/1e9, "GB/s-read")
		})
	}
}
