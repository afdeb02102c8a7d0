package stdnet_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/transport/stdnet"
	"github.com/inflightmq/inflight/transport/tcp"
)

// TestInterop: stdnet and tcp speak the same frames; each client works with
// the other's server.
func TestInterop(t *testing.T) {
	t.Run("tcp dialer, stdnet server", func(t *testing.T) {
		e := newEnv(t, false)
		d, err := tcp.NewDialer(e.addr())
		require.NoError(t, err)
		defer d.Close()
		sendSome(t, d, e.store)
	})
	t.Run("stdnet dialer, tcp server", func(t *testing.T) {
		store := broker.NewMemoryStore()
		b, _ := broker.New(store)
		srv, err := tcp.NewServer("127.0.0.1:0", b)
		require.NoError(t, err)
		defer srv.Close(context.Background())
		d, err := stdnet.NewDialer(srv.Addr().String())
		require.NoError(t, err)
		defer d.Close()
		sendSome(t, d, store)
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
