package tcp_test

import (
	"context"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/transport/tcp"
)

// TestTCPLoopParks: while its connections are quiet, the Dialer's event
// loop waits in the Go scheduler, not in a system call (where it would keep
// a P); inbound frames wake it, and Close, a second Dial, and the Dialer's
// Close all get through a parked loop.
func TestTCPLoopParks(t *testing.T) {
	addr := testkit.Serve(t, echo)
	d, err := tcp.NewDialer(addr)
	require.NoError(t, err)
	closed := false
	defer func() {
		if !closed {
			d.Close()
		}
	}()
	h1 := newRecorder()
	c1, err := d.Dial(context.Background(), h1)
	require.NoError(t, err)
	waitUntil(t, "the loop to park", func() bool { return tcp.Parks(d) > 0 })
	waitUntil(t, "no goroutine in a system call", func() bool { return inSyscalls() == 0 })

	// ping writes a frame after a quiet gap and waits for its echo and
	// for the loop to park again.
	ping := func(conn transport.Conn, h *recorder, i int) {
		t.Helper()
		parks := tcp.Parks(d)
		time.Sleep(2 * tcp.ParkAfter) // the gap after which the loop parks
		require.NoError(t, conn.WriteFrame(&transport.Buffer{Bytes: frame(i, 64)}))
		require.Equal(t, frame(i, 64), h.next(t), "echo %d", i)
		waitUntil(t, "the loop to park again", func() bool { return tcp.Parks(d) > parks })
	}
	for i := range 20 {
		ping(c1, h1, i)
	}

	// Echoes that come close together: the loop waits in epoll_wait,
	// and every frame still arrives.
	for i := range 200 {
		require.NoError(t, c1.WriteFrame(&transport.Buffer{Bytes: frame(i, 64)}))
		require.Equal(t, frame(i, 64), h1.next(t), "echo %d", i)
	}

	// A second connection: both wake the loop.
	h2 := newRecorder()
	c2, err := d.Dial(context.Background(), h2)
	require.NoError(t, err)
	for i := range 10 {
		ping(c1, h1, i)
		ping(c2, h2, i)
	}
	waitUntil(t, "the loop to park with two connections", func() bool { return inSyscalls() == 0 })

	require.NoError(t, c1.Close())
	assert.NoError(t, h1.waitClose(t))
	ping(c2, h2, 7)
	waitUntil(t, "the loop to park after a close", func() bool { return inSyscalls() == 0 })

	done := make(chan error, 1)
	go func() { done <- d.Close() }()
	select {
	case err := <-done:
		closed = true
		require.NoError(t, err)
	case <-time.After(waitTimeout):
		t.Fatal("Dialer.Close stuck behind a parked loop")
	}
	assert.ErrorIs(t, h2.waitClose(t), transport.ErrClosed)
}

// inSyscalls returns how many goroutines are in a system call.
func inSyscalls() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines/not-in-go:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
