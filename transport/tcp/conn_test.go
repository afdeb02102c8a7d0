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

// frame returns a frame of size bytes (prefix included) whose body is one
// byte over and over, i's remainder by 200: never 0xee, writeRig's
// scribble.
func frame(i, size int) []byte {
	f := bytes.Repeat([]byte{byte(i % 200)}, size)
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
	_, conn, h := dialer(t, addr)
	return conn, h
}

// dialer is dial, and returns the Dialer too.
func dialer(t *testing.T, addr string) (*tcp.Dialer, transport.Conn, *recorder) {
	t.Helper()
	d, err := tcp.NewDialer(addr)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	h := newRecorder()
	conn, err := d.Dial(context.Background(), h)
	require.NoError(t, err)
	return d, conn, h
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

// writeRig is a connection to a peer that reads nothing until resume, and
// records what it reads; every buffer the Dialer releases is scribbled
// over at once, so a buffer released while its bytes were still needed
// shows as a frame the peer reads damaged. The peer's receive buffer is
// small and fixed (64 KiB), so that unread bytes fill the socket soon.
type writeRig struct {
	t       *testing.T
	d       *tcp.Dialer
	conn    transport.Conn
	h       *recorder
	start   chan struct{}
	mu      sync.Mutex
	got     []byte // what the peer read
	gotEOF  bool   // the peer read the end
	want    bytes.Buffer
	n       int // frames written
	freed   atomic.Int64
	release chan *transport.Buffer
}

func newWriteRig(t *testing.T) *writeRig {
	r := &writeRig{t: t, start: make(chan struct{}), release: make(chan *transport.Buffer, 1<<14)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ee := bytes.Repeat([]byte{0xee}, 64<<10)
		for b := range r.release {
			for rest := b.Bytes; len(rest) > 0; {
				rest = rest[copy(rest, ee):]
			}
			r.freed.Add(1)
		}
	}()
	t.Cleanup(func() { close(r.release); <-done }) // after the Dialer's Close: no release comes later
	addr := testkit.Serve(t, func(c net.Conn) {
		_ = c.(*net.TCPConn).SetReadBuffer(64 << 10)
		select {
		case <-r.start:
		case <-t.Context().Done():
			return
		}
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			r.mu.Lock()
			r.got = append(r.got, buf[:n]...)
			r.gotEOF = err == io.EOF
			r.mu.Unlock()
			if err != nil {
				return
			}
		}
	})
	r.d, r.conn, r.h = dialer(t, addr)
	return r
}

// write writes per frames of size bytes (a third of it for every other
// one, so that writes end at odd places), in one WriteFrame for per 1.
func (r *writeRig) write(size, per int) {
	r.t.Helper()
	bufs := make([]*transport.Buffer, per)
	for j := range bufs {
		f := frame(r.n, size/(1+2*(j%2)))
		r.n++
		r.want.Write(f)
		bufs[j] = &transport.Buffer{Bytes: f, Owner: r.release}
	}
	if per == 1 {
		require.NoError(r.t, r.conn.WriteFrame(bufs[0]))
		return
	}
	require.NoError(r.t, r.conn.(transport.FramesWriter).WriteFrames(bufs))
}

// read returns what the peer has read so far, and whether it read the end.
func (r *writeRig) read() ([]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.got), r.gotEOF
}

// resume lets the peer read.
func (r *writeRig) resume() { close(r.start) }

// settled waits until every buffer written is released and the peer read
// every byte written, whole and in order.
func (r *writeRig) settled() {
	r.t.Helper()
	waitUntil(r.t, "every buffer released", func() bool { return r.freed.Load() == int64(r.n) })
	waitUntil(r.t, "the peer to read everything", func() bool { got, _ := r.read(); return len(got) == r.want.Len() })
	got, _ := r.read()
	require.True(r.t, bytes.Equal(r.want.Bytes(), got), "the peer read the frames whole and in order")
}

// fillViaLoop writes frames of size until the socket stops taking them
// and they go through gnet.
func (r *writeRig) fillViaLoop(size, per int) {
	r.t.Helper()
	for i := 0; !tcp.ViaLoop(r.conn); i++ {
		require.Less(r.t, i, 8192, "the socket never filled")
		r.write(size, per)
	}
}

// TestTCPWritesFallBackToGnetInOrder: frames the socket does not take at
// once go to gnet's queue, and the frames after them follow them there; no
// buffer is released while its bytes are still needed; once gnet has
// written everything, writing goes back to the caller's goroutine. Frames
// written one by one (WriteFrame) and several at once (WriteFrames, whose
// vectored write may stop inside any of them), in runs too small for the
// writer goroutine.
func TestTCPWritesFallBackToGnetInOrder(t *testing.T) {
	for _, per := range []int{1, 3} {
		t.Run(fmt.Sprint("frames per write=", per), func(t *testing.T) {
			r := newWriteRig(t)
			size := 16 << 10
			require.Less(t, size*per, tcp.HandOffBytes)
			r.fillViaLoop(size, per)
			for range 3 {
				r.write(size, per)
			}
			r.resume()
			r.settled()
			waitUntil(t, "writing handed back", func() bool { return !tcp.ViaLoop(r.conn) })
			if !tcp.DirectWrites {
				return
			}
			// The socket is empty again: small frames go straight to it, and
			// are released at once.
			for range 2 {
				r.write(100, per)
			}
			assert.False(t, tcp.ViaLoop(r.conn), "written directly")
			r.settled()
			_, runs := tcp.ViaWriter(r.conn)
			assert.Zero(t, runs, "no run went to the writer")
		})
	}
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
