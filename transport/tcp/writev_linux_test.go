package tcp

import (
	"bytes"
	"io"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/inflightmq/inflight/transport"
)

// TestWriteAllStopsAnywhere: writeAll on a socket with a small send buffer
// stops where the socket stops taking bytes, between buffers or inside
// one, skips empty buffers, and what it reports left is exactly what the
// peer has not got: writing the rest later gives the peer every byte once,
// in order. More buffers than one writev takes are split.
func TestWriteAllStopsAnywhere(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	require.NoError(t, err)
	require.NoError(t, unix.SetNonblock(fds[0], true))
	require.NoError(t, unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_SNDBUF, 4096))
	peer := os.NewFile(uintptr(fds[1]), "peer")
	defer peer.Close()
	defer unix.Close(fds[0])

	var want bytes.Buffer
	var bufs []*transport.Buffer
	for i := range 3000 { // over maxIovecs
		b := bytes.Repeat([]byte{byte(i)}, (i*37)%1500) // some empty
		want.Write(b)
		bufs = append(bufs, &transport.Buffer{Bytes: b})
	}
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(peer)
		got <- b
	}()

	var iov []iovec
	stops := 0
	deadline := time.Now().Add(10 * time.Second)
	for rest, from := bufs, bufs[0].Bytes; len(rest) > 0; {
		require.True(t, time.Now().Before(deadline), "the peer stopped reading")
		sent, left, err := writeAll(fds[0], &iov, rest, from)
		require.NoError(t, err)
		if sent == len(rest) {
			assert.Empty(t, left)
			break
		}
		stops++
		whole := rest[sent].Bytes
		require.True(t, bytes.HasSuffix(whole, left), "what is left is the end of the buffer it stopped in")
		for i := range iov[:cap(iov)] {
			assert.Nil(t, iov[:cap(iov)][i].Base, "no pointer into a frame kept")
		}
		// The rest, from where it stopped.
		rest, from = rest[sent:], left
		// Until the socket takes bytes again.
		if _, err := unix.Poll([]unix.PollFd{{Fd: int32(fds[0]), Events: unix.POLLOUT}}, 1000); err != unix.EINTR {
			require.NoError(t, err)
		}
	}
	unix.Shutdown(fds[0], unix.SHUT_WR)
	select {
	case b := <-got:
		require.True(t, bytes.Equal(want.Bytes(), b), "every byte once, in order")
	case <-time.After(10 * time.Second):
		t.Fatal("the peer did not see the end")
	}
	assert.Positive(t, stops, "the socket never filled: the test did not stop a write")
}
