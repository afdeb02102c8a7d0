package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/core"
)

// TestHeartbeatDetectsSilentBroker: a broker that stops reading (and so
// stops answering PINGs) is declared dead after two heartbeat intervals,
// and the producer dials again and delivers.
func TestHeartbeatDetectsSilentBroker(t *testing.T) {
	e := newEnv(t, core.Heartbeat(20*time.Millisecond), core.SendTimeout(time.Minute))
	_, err := e.p.Send(context.Background(), &core.Message{Payload: []byte("first")})
	require.NoError(t, err)

	e.dialer.StallWrites(true)
	waitUntil(t, "a heartbeat failure", func() bool { return e.errs.Has(core.ErrHeartbeat) })
	e.dialer.StallWrites(false)
	_, err = e.p.Send(context.Background(), &core.Message{Payload: []byte("second")})
	require.NoError(t, err)
	require.GreaterOrEqual(t, e.dialer.Dials(), 2)
}

// TestIdleConnectionStaysUp: an idle but healthy connection answers PINGs
// and is not torn down.
func TestIdleConnectionStaysUp(t *testing.T) {
	// An interval long enough that a loaded machine (the race detector,
	// parallel packages) answers a PING within it.
	e := newEnv(t, core.Heartbeat(150*time.Millisecond))
	_, err := e.p.Send(context.Background(), &core.Message{})
	require.NoError(t, err)
	deadline := time.Now().Add(900 * time.Millisecond) // six heartbeat intervals
	for time.Now().Before(deadline) {
		require.Equal(t, 1, e.dialer.Dials(), "the idle connection was replaced")
		time.Sleep(10 * time.Millisecond)
	}
}
