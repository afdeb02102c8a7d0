package tcp_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/server"
)

// gateProxy forwards connections to addr; what its client writes it
// forwards only until pause, and again after resume (one of each): while
// paused it reads nothing from the client, whose socket then fills.
type gateProxy struct {
	addr    string
	paused  atomic.Bool
	resumed chan struct{}
}

func newGateProxy(t *testing.T, to string) *gateProxy {
	g := &gateProxy{resumed: make(chan struct{})}
	g.addr = testkit.Serve(t, func(c net.Conn) {
		_ = c.(*net.TCPConn).SetReadBuffer(64 << 10)
		up, err := net.Dial("tcp", to)
		if err != nil {
			return
		}
		defer up.Close()
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Go(func() {
			_, _ = io.Copy(c, up)
			c.Close()
		})
		buf := make([]byte, 64<<10)
		for {
			if g.paused.Load() {
				select {
				case <-g.resumed:
				case <-t.Context().Done():
					up.Close()
					return
				}
			}
			n, err := c.Read(buf)
			if _, werr := up.Write(buf[:n]); err != nil || werr != nil {
				up.Close()
				return
			}
		}
	})
	return g
}

func (g *gateProxy) pause()  { g.paused.Store(true) }
func (g *gateProxy) resume() { g.paused.Store(false); close(g.resumed) }

// TestTCPZeroCopyFailedMessagesGiveTheirPayloadsBack is ZeroCopyMin end to
// end: large payloads go from the Messages' memory to the socket; with
// the broker's side stalled (a proxy that stops reading) the writer holds
// frames of them (13 MB written, beyond what the sockets take) when their
// messages fail (their context ends). Each callback overwrites its
// payload at once, as a caller may. When the broker reads again, every
// message is stored with its payload as it was sent: nothing read a
// payload after its callback ran.
func TestTCPZeroCopyFailedMessagesGiveTheirPayloadsBack(t *testing.T) {
	store := broker.NewMemoryStore()
	b, _ := broker.New(store)
	srv, err := server.New("127.0.0.1:0", b)
	require.NoError(t, err)
	defer srv.Close(context.Background())
	g := newGateProxy(t, srv.Addr().String())

	const size, n = 64 << 10, 200
	p, _ := newProducer(t, g.addr, core.MaxFramesInFlight(16),
		core.MaxPendingBytes(1<<30), core.MaxPendingBytesPerTopic(1<<30), core.Heartbeat(time.Minute))
	_, err = p.Send(context.Background(), &core.Message{Payload: []byte("connected")})
	require.NoError(t, err)
	g.pause()

	msgs := make([]*core.Message, n)
	for i := range msgs {
		payload := bytes.Repeat([]byte{byte(i)}, size)
		binary.BigEndian.PutUint32(payload, uint32(i))
		msgs[i] = &core.Message{Payload: payload}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var canceled atomic.Int64
	var cbs sync.WaitGroup
	cbs.Add(n)
	for _, m := range msgs {
		require.NoError(t, p.SendAsync(ctx, m, func(_ core.MessageID, m *core.Message, err error) {
			defer cbs.Done()
			if errors.Is(err, context.Canceled) {
				canceled.Add(1)
			}
			for i := range m.Payload {
				m.Payload[i] = 0xdd // the caller's again
			}
		}))
	}
	waitUntil(t, "every message to be written", func() bool { return p.Stats().Sent == 1+n })
	cancel()
	testkit.WaitGroup(t, &cbs, "every callback")
	require.EqualValues(t, n, canceled.Load(), "the broker read nothing: every message failed")

	g.resume()
	name := p.Name()
	waitUntil(t, "every message to be stored", func() bool { return store.Len(name) >= 1+n })
	recs := store.Records(name)
	require.Len(t, recs, 1+n, "every message stored once")
	for _, r := range recs[1:] {
		i := binary.BigEndian.Uint32(r.Payload)
		want := bytes.Repeat([]byte{byte(i)}, size)
		binary.BigEndian.PutUint32(want, i)
		require.True(t, bytes.Equal(want, r.Payload), "message %d stored as it was sent", i)
	}
}
