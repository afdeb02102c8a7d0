package stdnet_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/transport/stdnet"
	"github.com/inflightmq/inflight/wire"
)

const waitTimeout = 10 * time.Second

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// newProducer dials addr with a stdnet.Dialer and returns a producer
// closed, with its dialer, at the end of the test.
func newProducer(t *testing.T, addr string, dopts []stdnet.DialOption, opts ...core.Option) (*core.Producer, *testkit.ErrLog) {
	t.Helper()
	d, err := stdnet.NewDialer(addr, dopts...)
	require.NoError(t, err)
	return testkit.NewProducer(t, d, d.Close, uniqueName(t.Name()), opts...)
}

var nameSeq atomic.Int64

func uniqueName(base string) string { return fmt.Sprintf("%s-%d", base, nameSeq.Add(1)) }

func TestDialerOptions(t *testing.T) {
	_, err := stdnet.NewDialer("no-port")
	assert.ErrorIs(t, err, stdnet.ErrInvalidOption)
	for _, o := range []stdnet.DialOption{stdnet.ConnectTimeout(0), stdnet.MaxInboundFrame(10), stdnet.WriteQueue(0), stdnet.ClientTLS(nil), nil} {
		_, err = stdnet.NewDialer("127.0.0.1:1", o)
		assert.ErrorIs(t, err, stdnet.ErrInvalidOption)
	}
}

// TestStalledReaderBoundsMemory: a broker that stops reading must stop
// the producer's pump, not grow the client's memory.
func TestStalledReaderBoundsMemory(t *testing.T) {
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
		silentHello(c)
		<-stop // never read again
	})

	const size, n = 64 << 10, 2000 // 128 MiB offered
	p, _ := newProducer(t, ln.Addr().String(), nil, core.MaxPendingBytes(1<<30), core.MaxPending(n), core.SendTimeout(time.Minute), core.Heartbeat(time.Minute))
	payload := make([]byte, size)
	var ms0 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	for range n {
		require.NoError(t, p.SendAsync(context.Background(), &core.Message{Payload: payload}, func(core.MessageID, *core.Message, error) {}))
	}
	last, still := uint64(0), 0
	waitUntil(t, "the pump to stall", func() bool {
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

// silentHello answers the HELLO and returns.
func silentHello(c net.Conn) {
	buf := make([]byte, 0, 512)
	tmp := make([]byte, 512)
	for {
		frame, _, err := wire.Split(buf, wire.DefaultMaxFrameSize)
		if err != nil || frame != nil {
			break
		}
		n, err := c.Read(tmp)
		if err != nil {
			return
		}
		buf = append(buf, tmp[:n]...)
	}
	_, _ = c.Write(wire.AppendHelloOK(nil, wire.HelloOK{MaxFrameSize: wire.DefaultMaxFrameSize, Epoch: 1}))
}

func TestDialerClosed(t *testing.T) {
	d, err := stdnet.NewDialer("127.0.0.1:1")
	require.NoError(t, err)
	require.NoError(t, d.Close())
	require.NoError(t, d.Close())
	_, err = d.Dial(context.Background(), nil)
	assert.ErrorIs(t, err, stdnet.ErrDialerClosed)
}

// discard reads c until it fails.
func discard(c net.Conn) { _, _ = io.Copy(io.Discard, c) }
