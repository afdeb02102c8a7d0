package tcp_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/transport/tcp"
)

// frame returns a frame of size bytes (prefix included) whose body is i's
// byte over and over.
func frame(i, size int) []byte {
	f := bytes.Repeat([]byte{byte(i)}, size)
	binary.BigEndian.PutUint32(f, uint32(size-4))
	return f
}

// recorder is a transport.Handler that hands inbound frames to a channel
// and records its close.
type recorder struct {
	frames chan []byte
	closed chan error
}

func newRecorder() *recorder {
	return &recorder{frames: make(chan []byte, 1024), closed: make(chan error, 1)}
}

func (r *recorder) OnFrame(f []byte)  { r.frames <- bytes.Clone(f) }
func (r *recorder) OnClose(err error) { r.closed <- err }

func (r *recorder) next(t *testing.T) []byte {
	t.Helper()
	return testkit.WaitChan(t, r.frames, "a frame")
}

func (r *recorder) waitClose(t *testing.T) error {
	t.Helper()
	return testkit.WaitChan(t, r.closed, "OnClose")
}

// dial dials addr with a Dialer of its own, closed at the end of the test.
func dial(t *testing.T, addr string) (transport.Conn, *recorder) {
	t.Helper()
	d, err := tcp.NewDialer(addr)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	h := newRecorder()
	conn, err := d.Dial(context.Background(), h)
	require.NoError(t, err)
	return conn, h
}

// echo writes back every frame it reads, until the connection ends.
func echo(c net.Conn) {
	prefix := make([]byte, 4)
	for {
		if _, err := io.ReadFull(c, prefix); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(prefix))
		if _, err := io.ReadFull(c, body); err != nil {
			return
		}
		if _, err := c.Write(append(prefix, body...)); err != nil {
			return
		}
	}
}

// TestTCPWritesFallBackToGnetInOrder: frames the socket does not take at
// once go to gnet's queue, and the frames after them follow them there;
// none is released before its bytes left for the socket; once the peer
// reads, everything arrives whole and in order, every buffer is released,
// and writing goes back to the caller's goroutine.
func TestTCPWritesFallBackToGnetInOrder(t *testing.T) {
	start := make(chan struct{})
	got := make(chan []byte, 1)
	addr := testkit.Serve(t, func(c net.Conn) {
		<-start
		b, _ := io.ReadAll(c)
		got <- b
	})
	conn, _ := dial(t, addr)

	const size = 256 << 10
	released := make(chan *transport.Buffer, 1024)
	var want bytes.Buffer
	write := func(i int) {
		f := frame(i, size)
		want.Write(f)
		require.NoError(t, conn.WriteFrame(&transport.Buffer{Bytes: f, Owner: released}))
	}
	n := 0
	for ; !tcp.ViaLoop(conn); n++ {
		require.Less(t, n, 512, "the socket never filled")
		write(n)
	}
	queued := n
	for range 3 {
		write(n)
		n++
	}
	assert.True(t, tcp.ViaLoop(conn), "frames follow the queued one through gnet")
	assert.Len(t, released, queued-1, "released: the frames the socket took whole, and no other")

	close(start)
	for i := range n {
		select {
		case <-released:
		case <-time.After(waitTimeout):
			t.Fatalf("%d of %d buffers released", i, n)
		}
	}
	waitUntil(t, "writing handed back", func() bool { return !tcp.ViaLoop(conn) })
	for range 2 {
		write(n)
		n++
	}
	assert.False(t, tcp.ViaLoop(conn), "written directly")
	assert.Len(t, released, 2, "written directly: released at once")
	require.NoError(t, conn.Close())
	b := testkit.WaitChan(t, got, "the peer to see the close")
	require.True(t, bytes.Equal(want.Bytes(), b), "the peer read %d bytes, want the %d written, in order", len(b), want.Len())
}

// TestTCPNoWriteAfterClose: after Close, WriteFrame returns ErrClosed and
// the peer reads only what was written before, then the end.
func TestTCPNoWriteAfterClose(t *testing.T) {
	got := make(chan []byte, 1)
	addr := testkit.Serve(t, func(c net.Conn) {
		b, _ := io.ReadAll(c)
		got <- b
	})
	conn, h := dial(t, addr)
	var want bytes.Buffer
	for i := range 10 {
		f := frame(i, 100)
		want.Write(f)
		require.NoError(t, conn.WriteFrame(&transport.Buffer{Bytes: f}))
	}
	require.NoError(t, conn.Close())
	require.NoError(t, conn.Close(), "idempotent")
	assert.ErrorIs(t, conn.WriteFrame(&transport.Buffer{Bytes: frame(10, 100)}), transport.ErrClosed)
	assert.NoError(t, h.waitClose(t), "a local close")
	require.Equal(t, want.Bytes(), testkit.WaitChan(t, got, "the peer to see the close"))
}

// TestTCPPeerResetEndsWrites: once the peer reset the connection, writes
// fail with ErrClosed and OnClose reports the reset.
func TestTCPPeerResetEndsWrites(t *testing.T) {
	reset, gone := make(chan struct{}), make(chan struct{})
	addr := testkit.Serve(t, func(c net.Conn) {
		<-reset
		_ = c.(*net.TCPConn).SetLinger(0) // the close sends a reset
		c.Close()
		close(gone)
	})
	conn, h := dial(t, addr)
	close(reset)
	testkit.WaitChan(t, gone, "the reset")
	deadline := time.Now().Add(waitTimeout)
	for conn.WriteFrame(&transport.Buffer{Bytes: frame(1, 100)}) == nil {
		require.True(t, time.Now().Before(deadline), "writes to a reset connection kept succeeding")
		runtime.Gosched()
	}
	assert.ErrorIs(t, conn.WriteFrame(&transport.Buffer{Bytes: frame(2, 100)}), transport.ErrClosed)
	assert.Error(t, h.waitClose(t), "the reset is reported")
}
