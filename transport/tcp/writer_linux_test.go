package tcp_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/transport/tcp"
)

// newWriterRig is newWriteRig with the connection's send buffer fixed
// (128 KiB): a socket the peer does not read takes a known few hundred
// KiB, whatever the host's tuning.
func newWriterRig(t *testing.T) *writeRig {
	r := newWriteRig(t)
	require.NoError(t, tcp.SetSendBuffer(r.conn, 64<<10))
	return r
}

// fillWriter writes runs of HandOffBytes until the writer has waited for
// the socket, and then a few more: those stay queued while the peer reads
// nothing.
func (r *writeRig) fillWriter(per int) {
	r.t.Helper()
	for i := 0; tcp.WriterWaits(r.conn) == 0; i++ {
		require.Less(r.t, i, 64, "the socket never filled")
		r.write(tcp.HandOffBytes, per)
	}
	for range 4 {
		r.write(tcp.HandOffBytes, per)
	}
}

// TestTCPLargeRunsGoToTheWriterInOrder: a run of frames of HandOffBytes or
// more goes to the writer goroutine, and every frame after it follows it
// there, small ones too, while the writer holds any; the writer waits for
// a full socket, releases each buffer only once its bytes are written, and
// hands writing back once it has written everything.
func TestTCPLargeRunsGoToTheWriterInOrder(t *testing.T) {
	for _, per := range []int{1, 3} {
		t.Run(fmt.Sprint("frames per write=", per), func(t *testing.T) {
			r := newWriterRig(t)
			r.fillWriter(per)
			_, large := tcp.ViaWriter(r.conn)
			require.EqualValues(t, r.n/per, large, "every run went to the writer")
			for range 4 {
				r.write(100, per)
			}
			via, runs := tcp.ViaWriter(r.conn)
			assert.True(t, via, "the writer still holds frames")
			assert.Equal(t, large+4, runs, "the small frames queued behind the large ones")
			assert.False(t, tcp.ViaLoop(r.conn))

			r.resume()
			r.settled()
			waitUntil(t, "writing handed back", func() bool { via, _ := tcp.ViaWriter(r.conn); return !via })
			r.write(100, per)
			_, runs = tcp.ViaWriter(r.conn)
			assert.Equal(t, large+4, runs, "written directly again")
			r.settled()
		})
	}
}

// TestTCPLargeRunBehindGnetGoesToGnet: while gnet holds bytes of the
// connection's, a large run goes to gnet too, behind them, not to the
// writer; once gnet has written everything, the next large run goes to the
// writer.
func TestTCPLargeRunBehindGnetGoesToGnet(t *testing.T) {
	r := newWriterRig(t)
	r.fillViaLoop(16<<10, 1)
	// A MiB more than the socket takes while the peer reads nothing (its
	// send buffer and the peer's receive buffer, fixed small): gnet holds
	// bytes at the large run whatever it wrote meanwhile. Without these,
	// gnet could write its one frame as the peer's kernel took in flight
	// bytes, and the large run went to the writer.
	for range 64 {
		r.write(16<<10, 1)
	}
	require.True(t, tcp.ViaLoop(r.conn), "gnet holds bytes")
	r.write(tcp.HandOffBytes, 1)
	via, runs := tcp.ViaWriter(r.conn)
	assert.False(t, via)
	assert.Zero(t, runs, "the large run went to gnet")
	r.resume()
	r.settled()
	waitUntil(t, "writing handed back", func() bool { return !tcp.ViaLoop(r.conn) })
	r.write(tcp.HandOffBytes, 1)
	_, runs = tcp.ViaWriter(r.conn)
	assert.EqualValues(t, 1, runs)
	r.settled()
}

// TestTCPCloseStopsAWaitingWriter: Close while the writer waits for a
// socket the peer does not read stops the writer (the frames it holds are
// abandoned), the peer sees the end after what it reads, and the Dialer's
// Close, which waits for its writers, returns.
func TestTCPCloseStopsAWaitingWriter(t *testing.T) {
	r := newWriterRig(t)
	r.fillWriter(1)
	require.NoError(t, r.conn.Close())
	assert.NoError(t, r.h.waitClose(t), "a local close")
	assert.ErrorIs(t, r.conn.WriteFrame(&transport.Buffer{Bytes: frame(0, tcp.HandOffBytes)}), transport.ErrClosed)
	r.resume()
	waitUntil(t, "the peer to see the end", func() bool { _, eof := r.read(); return eof })
	got, _ := r.read()
	require.True(t, bytes.HasPrefix(r.want.Bytes(), got), "what the peer read is a prefix of what was written")
	assert.Less(t, len(got), r.want.Len(), "frames the writer held were abandoned")
	closed := make(chan error, 1)
	go func() { closed <- r.d.Close() }()
	assert.NoError(t, testkit.WaitChan(t, closed, "the Dialer's Close"))
}

// TestTCPDialerCloseStopsAWaitingWriter: the Dialer's Close alone (no
// Close of the connection first) stops a writer that waits for a socket
// the peer does not read, and returns.
func TestTCPDialerCloseStopsAWaitingWriter(t *testing.T) {
	r := newWriterRig(t)
	r.fillWriter(1)
	closed := make(chan error, 1)
	go func() { closed <- r.d.Close() }()
	assert.NoError(t, testkit.WaitChan(t, closed, "the Dialer's Close"))
	r.h.waitClose(t)
	assert.ErrorIs(t, r.conn.WriteFrame(&transport.Buffer{Bytes: frame(0, 100)}), transport.ErrClosed)
}

// TestTCPWriterFailureClosesTheConnection: a write of the writer's that
// fails (the socket shut for writing while the writer waits for room:
// EPIPE) closes the connection, and OnClose reports that error.
func TestTCPWriterFailureClosesTheConnection(t *testing.T) {
	r := newWriterRig(t)
	r.fillWriter(1)
	require.NoError(t, tcp.ShutdownWrite(r.conn))
	err := r.h.waitClose(t)
	assert.ErrorIs(t, err, syscall.EPIPE)
	var sys *os.SyscallError
	assert.True(t, errors.As(err, &sys) && sys.Syscall == "write", "a write error: %v", err)
	assert.ErrorIs(t, r.conn.WriteFrame(&transport.Buffer{Bytes: frame(0, 100)}), transport.ErrClosed)
}

// TestTCPPeerResetStopsTheWriter: a peer that resets the connection while
// the writer has frames to write ends the connection: OnClose reports the
// error, and writes fail with ErrClosed.
func TestTCPPeerResetStopsTheWriter(t *testing.T) {
	reset, gone := make(chan struct{}), make(chan struct{})
	addr := testkit.Serve(t, func(c net.Conn) {
		select {
		case <-reset:
		case <-t.Context().Done():
			return
		}
		_ = c.(*net.TCPConn).SetLinger(0) // the close sends a reset
		c.Close()
		close(gone)
	})
	conn, h := dial(t, addr)
	require.NoError(t, tcp.SetSendBuffer(conn, 64<<10))
	for i := 0; tcp.WriterWaits(conn) == 0; i++ {
		require.Less(t, i, 64, "the socket never filled")
		require.NoError(t, conn.WriteFrame(&transport.Buffer{Bytes: frame(i, tcp.HandOffBytes)}))
	}
	close(reset)
	testkit.WaitChan(t, gone, "the reset")
	assert.Error(t, h.waitClose(t), "the reset is reported")
	assert.ErrorIs(t, conn.WriteFrame(&transport.Buffer{Bytes: frame(0, tcp.HandOffBytes)}), transport.ErrClosed)
}
