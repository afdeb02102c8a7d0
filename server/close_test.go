package server_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/server"
	"github.com/inflightmq/inflight/wire"
)

// TestCloseLeavesNoHalfOpenConns: clients that connect while the
// server is closing are answered, closed or refused, never left hanging
// (Close stops accepting first).
func TestCloseLeavesNoHalfOpenConns(t *testing.T) {
	var hung, total atomic.Int64
	for range 5 {
		b, _ := broker.New(broker.NewMemoryStore())
		srv, err := server.New("127.0.0.1:0", b)
		require.NoError(t, err)
		addr := srv.Addr().String()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := net.Dial("tcp", addr)
				if err != nil {
					continue
				}
				total.Add(1)
				wg.Go(func() {
					defer c.Close()
					h, _ := wire.AppendHello(nil, wire.Hello{Version: wire.Version, MaxFrameSize: wire.DefaultMaxFrameSize, Producer: "racer"})
					_, _ = c.Write(h)
					_ = c.SetReadDeadline(time.Now().Add(time.Second))
					_, err := c.Read(make([]byte, 64))
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						hung.Add(1)
					}
				})
				time.Sleep(100 * time.Microsecond)
			}
		})
		time.Sleep(5 * time.Millisecond)
		require.NoError(t, srv.Close(context.Background()))
		assert.NoError(t, srv.Close(context.Background()), "a second Close")
		time.Sleep(5 * time.Millisecond)
		close(stop)
		wg.Wait()
	}
	require.Positive(t, total.Load())
	assert.Zero(t, hung.Load(), "of %d connections", total.Load())
}
