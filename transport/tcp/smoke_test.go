package tcp_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/transport/tcp"
)

func TestTCPSendAndReceive(t *testing.T) {
	d, err := tcp.NewDialer(shared.server.Addr().String())
	require.NoError(t, err)
	defer d.Close()
	p, err := core.New(d, core.Name(uniqueName(t.Name())))
	require.NoError(t, err)
	const n = 20000
	done := make(chan error, n)
	start := time.Now()
	for i := range n {
		require.NoError(t, p.SendAsync(context.Background(), &core.Message{Payload: []byte{byte(i)}}, func(_ core.MessageID, _ *core.Message, err error) { done <- err }))
	}
	for range n {
		require.NoError(t, <-done)
	}
	t.Logf("%d messages in %v", n, time.Since(start))
	require.NoError(t, p.Close(context.Background()))
	require.Equal(t, n, shared.store.Len(p.Name()))
}
