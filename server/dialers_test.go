package server_test

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
