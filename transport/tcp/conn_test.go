package tcp_test

import (
	"bytes"
	"context"
	"encoding/binary"
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
// once go to gnet's queue, and the frames after them follow them there; no
// buffer is released while its bytes are still needed (each is scribbled
// over as soon as it is released, and the peer still reads every frame
// whole and in order); once gnet has written everything, writing goes back
// to the caller's goroutine. Frames written one by one (WriteFrame) and
// several at once (WriteFrames, whose vectored write may stop inside any
// of them).
func TestTCPWritesFallBackToGnetInOrder(t *testing.T) {
	for _, per := range []int{1, 3} {
		t.Run(fmt.Sprint("frames per write=", per), func(t *testing.T) { testWritesFallBack(t, per) })
	}
}

func testWritesFallBack(t *testing.T, per int) {
	start := make(chan struct{})
	var mu sync.Mutex
	var got []byte // what the peer read
	addr := testkit.Serve(t, func(c net.Conn) {
		<-start
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			mu.Lock()
			got = append(got, buf[:n]...)
			mu.Unlock()
			if err != nil {
				return
			}
		}
	})
	read := func() []byte {
		mu.Lock()
		defer mu.Unlock()
		return bytes.Clone(got)
	}
	conn, _ := dial(t, addr)

	released := make(chan *transport.Buffer, 1024)
	var scribbled atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for b := range released {
			for i := range b.Bytes {
				b.Bytes[i] = 0xee
			}
			scribbled.Add(1)
		}
	}()
	defer func() { close(released); <-done }()
	var want bytes.Buffer
	n := 0
	// write writes per frames of size bytes (a third of it for every
	// other one, so that writes end at odd places).
	write := func(size int) {
		bufs := make([]*transport.Buffer, per)
		for j := range bufs {
			f := frame(n, size/(1+2*(j%2)))
			n++
			want.Write(f)
			bufs[j] = &transport.Buffer{Bytes: f, Owner: released}
		}
		if per == 1 {
			require.NoError(t, conn.WriteFrame(bufs[0]))
			return
		}
		require.NoError(t, conn.(transport.FramesWriter).WriteFrames(bufs))
	}
	for i := 0; !tcp.ViaLoop(conn); i++ {
		require.Less(t, i, 512, "the socket never filled")
		write(256 << 10)
	}
	for range 3 {
		write(256 << 10)
	}

	close(start)
	waitUntil(t, "every buffer released", func() bool { return scribbled.Load() == int64(n) })
	waitUntil(t, "writing handed back", func() bool { return !tcp.ViaLoop(conn) })
	waitUntil(t, "the peer to read everything", func() bool { return len(read()) == want.Len() })
	require.True(t, bytes.Equal(want.Bytes(), read()), "the peer read the frames whole and in order")

	if !tcp.DirectWrites {
		return
	}
	// The socket is empty again: small frames go straight to it, and are
	// released at once.
	for range 2 {
		write(100)
	}
	assert.False(t, tcp.ViaLoop(conn), "written directly")
	waitUntil(t, "the direct writes' buffers released", func() bool { return scribbled.Load() == int64(n) })
	waitUntil(t, "the peer to read them", func() bool { return len(read()) == want.Len() })
	require.True(t, bytes.Equal(want.Bytes(), read()), "and in order")
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
	assert.ErrorIs(t, conn.(transport.FramesWriter).WriteFrames([]*transport.Buffer{{Bytes: frame(11, 100)}}), transport.ErrClosed)
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
