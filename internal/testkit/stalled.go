package testkit

import (
	"context"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/core"
)

// StalledReaderBoundsMemory checks a producer transport against a broker
// that answers the HELLO and then stops reading: the producer's pump must
// stop, not grow the client's memory. The bytes handed to the transport
// stay within the producer's window plus the kernel's socket buffers, far
// below the 128 MiB offered. newProducer returns a producer over the
// transport to addr with opts, closed at the end of the test.
func StalledReaderBoundsMemory(t *testing.T, newProducer func(addr string, opts ...core.Option) *core.Producer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	defer close(stop)
	wg.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		SilentHello(c)
		<-stop // never read again
	})

	const size, n = 64 << 10, 2000 // 128 MiB offered
	p := newProducer(ln.Addr().String(), core.MaxPendingBytes(1<<30), core.MaxPending(n), core.SendTimeout(time.Minute), core.Heartbeat(time.Minute))
	payload := make([]byte, size)
	var ms0 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	for range n {
		require.NoError(t, p.SendAsync(context.Background(), &core.Message{Payload: payload}, func(core.MessageID, *core.Message, error) {}))
	}
	// Wait until the pump has stopped making progress.
	last, still := uint64(0), 0
	WaitUntil(t, "the pump to stall", func() bool {
		time.Sleep(20 * time.Millisecond)
		w := p.Stats().BytesWire
		if w == last && w > 0 {
			still++
		} else {
			still = 0
		}
		last = w
		return still >= 10
	})
	var ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	written := p.Stats().BytesWire
	t.Logf("offered %d MiB, handed to the transport %.1f MiB, heap grew %.1f MiB",
		size*n>>20, float64(written)/(1<<20), (float64(ms1.HeapInuse)-float64(ms0.HeapInuse))/(1<<20))
	assert.Less(t, written, uint64(48<<20), "the window bounds what is handed to the transport")
	assert.Less(t, int64(ms1.HeapInuse)-int64(ms0.HeapInuse), int64(48<<20), "no unbounded buffering in the client")
}
