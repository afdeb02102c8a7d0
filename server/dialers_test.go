package server_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/server"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/transport/stdnet"
	"github.com/inflightmq/inflight/transport/tcp"
)

// TestBothDialers: the producer transports speak the same frames; each
// works with the server.
func TestBothDialers(t *testing.T) {
	t.Run("tcp", func(t *testing.T) {
		e := newEnv(t, false)
		d, err := tcp.NewDialer(e.addr())
		require.NoError(t, err)
		defer d.Close()
		sendSome(t, d, e.store)
	})
	t.Run("stdnet", func(t *testing.T) {
		e := newEnv(t, false)
		d, err := stdnet.NewDialer(e.addr())
		require.NoError(t, err)
		defer d.Close()
		sendSome(t, d, e.store)
	})
}

func sendSome(t *testing.T, d transport.Dialer, store *broker.MemoryStore) {
	t.Helper()
	p, err := core.New(d, core.Name(uniqueName(t.Name())))
	require.NoError(t, err)
	const n = 1000
	done := make(chan error, n)
	for i := range n {
		require.NoError(t, p.SendAsync(context.Background(), &core.Message{Payload: []byte{byte(i)}},
			func(_ core.MessageID, _ *core.Message, err error) { done <- err }))
	}
	for range n {
		require.NoError(t, <-done)
	}
	require.NoError(t, p.Close(context.Background()))
	require.Equal(t, n, store.Len(p.Name()))
}

// TestDialerSpreadsAndFailsOver: two servers on one store (gateways), each
// producer transport given both addresses. Four producers spread over the
// two; when one server goes, its producers reconnect to the other, and every
// message is acknowledged once and stored once, in order.
func TestDialerSpreadsAndFailsOver(t *testing.T) {
	for _, tc := range []struct {
		name string
		dial func(addrs string) (transport.Dialer, func() error, error)
	}{
		{"tcp", func(a string) (transport.Dialer, func() error, error) {
			d, err := tcp.NewDialer(a)
			if err != nil {
				return nil, nil, err
			}
			return d, d.Close, nil
		}},
		{"stdnet", func(a string) (transport.Dialer, func() error, error) {
			d, err := stdnet.NewDialer(a)
			if err != nil {
				return nil, nil, err
			}
			return d, d.Close, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := broker.NewMemoryStore()
			var srvs [2]*server.Server
			for i := range srvs {
				b, err := broker.New(store)
				require.NoError(t, err)
				srvs[i], err = server.New("127.0.0.1:0", b)
				require.NoError(t, err)
				defer srvs[i].Close(context.Background())
			}
			d, closeDialer, err := tc.dial(srvs[0].Addr().String() + "," + srvs[1].Addr().String())
			require.NoError(t, err)

			const producers, n = 4, 400
			ps := make([]*core.Producer, producers)
			for i := range ps {
				ps[i], _ = testkit.NewProducer(t, d, func() error { return nil }, uniqueName(t.Name()), core.SendTimeout(waitTimeout))
				_, err := ps[i].Send(context.Background(), &core.Message{Payload: []byte("0")})
				require.NoError(t, err)
			}
			defer closeDialer()
			for i, s := range srvs {
				assert.Equal(t, producers/2, s.Stats().Conns, "server %d: four dials alternate over two addresses", i)
			}

			var wg sync.WaitGroup
			var acked, failed atomic.Int64
			send := func(from, to int) {
				for _, p := range ps {
					for k := from; k < to; k++ {
						wg.Add(1)
						require.NoError(t, p.SendAsync(context.Background(), &core.Message{Payload: fmt.Append(nil, k)},
							func(_ core.MessageID, _ *core.Message, err error) {
								if err != nil {
									failed.Add(1)
								} else {
									acked.Add(1)
								}
								wg.Done()
							}))
					}
				}
			}
			send(1, n/2)
			require.NoError(t, srvs[0].Close(context.Background())) // its producers fail over
			send(n/2, n)
			wg.Wait()
			assert.Zero(t, failed.Load())
			assert.Equal(t, int64(producers*(n-1)), acked.Load())
			assert.Equal(t, producers, srvs[1].Stats().Conns, "every producer on the server left")
			for _, p := range ps {
				recs := store.Records(p.Name())
				require.Len(t, recs, n, p.Name())
				for k, r := range recs {
					require.Equal(t, fmt.Sprint(k), string(r.Payload), "%s record %d", p.Name(), k)
				}
			}
		})
	}
}
