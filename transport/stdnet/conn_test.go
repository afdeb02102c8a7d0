package stdnet_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/transport/stdnet"
)

// closeRecorder is a transport.Handler that records its close.
type closeRecorder struct {
	mu     sync.Mutex
	closes int
	err    error
	closed chan struct{}
}

func newCloseRecorder() *closeRecorder { return &closeRecorder{closed: make(chan struct{})} }

func (h *closeRecorder) OnFrame([]byte) {}

func (h *closeRecorder) OnClose(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closes++
	h.err = err
	if h.closes == 1 {
		close(h.closed)
	}
}

func (h *closeRecorder) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-h.closed:
	case <-time.After(waitTimeout):
		t.Fatal("OnClose not called")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Equal(t, 1, h.closes, "OnClose once")
	return h.err
}

// TestStdnetConnContract: every frame written is released once its bytes
// are written; Close makes OnClose run once with nil; WriteFrame then
// returns ErrClosed.
func TestStdnetConnContract(t *testing.T) {
	stop := make(chan struct{})
	addr := testkit.Serve(t, func(c net.Conn) {
		go func() { <-stop; c.Close() }()
		discard(c)
	})
	defer close(stop)
	d, err := stdnet.NewDialer(addr)
	require.NoError(t, err)
	defer d.Close()
	h := newCloseRecorder()
	conn, err := d.Dial(context.Background(), h)
	require.NoError(t, err)

	const n = 100
	owner := make(chan *transport.Buffer, n)
	for i := range n {
		require.NoError(t, conn.WriteFrame(&transport.Buffer{Bytes: make([]byte, 1000+i), Owner: owner}))
	}
	for range n {
		select {
		case <-owner:
		case <-time.After(waitTimeout):
			t.Fatal("a written frame was not released")
		}
	}
	require.NoError(t, conn.Close())
	require.NoError(t, conn.Close())
	assert.NoError(t, h.wait(t), "a local Close")
	assert.ErrorIs(t, conn.WriteFrame(&transport.Buffer{Bytes: []byte{1}}), transport.ErrClosed)
}

// TestStdnetWriteBacklog: a caller that hands over more frames than
// WriteQueue while the peer reads nothing gets ErrWriteBacklog and the
// connection closes; memory does not grow with what it offers.
func TestStdnetWriteBacklog(t *testing.T) {
	stop := make(chan struct{})
	addr := testkit.Serve(t, func(net.Conn) { <-stop }) // never reads
	defer close(stop)
	d, err := stdnet.NewDialer(addr, stdnet.WriteQueue(4))
	require.NoError(t, err)
	defer d.Close()
	h := newCloseRecorder()
	conn, err := d.Dial(context.Background(), h)
	require.NoError(t, err)
	frame := make([]byte, 1<<20)
	var werr error
	for range 1000 { // 1 GiB offered; kernel buffers hold a few MiB
		if werr = conn.WriteFrame(&transport.Buffer{Bytes: frame}); werr != nil {
			break
		}
	}
	require.ErrorIs(t, werr, stdnet.ErrWriteBacklog)
	require.ErrorIs(t, werr, transport.ErrClosed)
	assert.ErrorIs(t, h.wait(t), stdnet.ErrWriteBacklog)
}

// TestStdnetWriteFramesInOrder: frames handed over one by one and several
// at once reach the peer whole and in order, each released once; the
// backlog bound counts calls, not frames, so a call of more frames than
// WriteQueue is taken.
func TestStdnetWriteFramesInOrder(t *testing.T) {
	got := make(chan []byte, 1)
	addr := testkit.Serve(t, func(c net.Conn) {
		b, _ := io.ReadAll(c)
		got <- b
	})
	d, err := stdnet.NewDialer(addr, stdnet.WriteQueue(8)) // the 6 calls below fit, their 33 frames do not
	require.NoError(t, err)
	defer d.Close()
	h := newCloseRecorder()
	conn, err := d.Dial(context.Background(), h)
	require.NoError(t, err)

	var want bytes.Buffer
	owner := make(chan *transport.Buffer, 64)
	k := 0
	next := func() *transport.Buffer {
		b := bytes.Repeat([]byte{byte(k)}, 100+k)
		k++
		want.Write(b)
		return &transport.Buffer{Bytes: b, Owner: owner}
	}
	for range 3 {
		require.NoError(t, conn.WriteFrame(next()))
		bufs := make([]*transport.Buffer, 10) // more than WriteQueue
		for i := range bufs {
			bufs[i] = next()
		}
		require.NoError(t, conn.(transport.FramesWriter).WriteFrames(bufs))
	}
	for range k {
		testkit.WaitChan(t, owner, "a written frame released")
	}
	sent := bytes.Clone(want.Bytes())
	require.NoError(t, conn.Close())
	assert.NoError(t, h.wait(t), "a local Close")
	assert.Zero(t, len(owner), "a frame released twice")
	assert.ErrorIs(t, conn.(transport.FramesWriter).WriteFrames([]*transport.Buffer{next()}), transport.ErrClosed)
	require.True(t, bytes.Equal(sent, testkit.WaitChan(t, got, "the peer to see the close")), "the peer read every frame whole and in order")
}
