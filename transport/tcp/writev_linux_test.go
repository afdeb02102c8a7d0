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
	"github.com/inflightmq/inflight/wire"
)

// TestWriteAllStopsAnywhere: writeAll on a socket with a small send buffer
// stops where the socket stops taking bytes, between buffers, inside one
// or inside a splice, skips empty buffers and pieces, and the offset it
// reports is exactly where the peer's bytes end: writing on from there
// later gives the peer every byte once, in order. Frames with splices
// (pieces at the start, the end, two at one offset, empty ones) go out as
// their flattened bytes. More pieces than one writev takes are split.
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
		buf := &transport.Buffer{Bytes: b}
		if i%3 == 0 && len(b) > 0 {
			// Cut out some pieces as splices: the frame stays b.
			var head []byte
			at := 0
			for _, cut := range [][2]int{{0, 1}, {len(b) / 3, len(b) / 3}, {len(b) / 3, len(b) / 2}, {len(b) / 2, len(b)}} {
				head = append(head, b[at:cut[0]]...)
				buf.Splices = append(buf.Splices, wire.Splice{At: len(head), Data: b[cut[0]:cut[1]]})
				at = cut[1]
			}
			buf.Bytes = append(head, b[at:]...)
			require.Equal(t, b, wire.AppendFlat(nil, buf.Bytes, buf.Splices))
		}
		want.Write(b)
		bufs = append(bufs, buf)
	}
	// One frame of more pieces than a writev takes: 1500 splices of two
	// bytes each.
	b := bytes.Repeat([]byte{0x5a, 0xa5}, 1500)
	buf := &transport.Buffer{}
	for i := 0; i < len(b); i += 2 {
		buf.Splices = append(buf.Splices, wire.Splice{At: 0, Data: b[i : i+2]})
	}
	bufs = append(bufs[:1500], append([]*transport.Buffer{buf}, bufs[1500:]...)...)
	want.Reset()
	for _, b := range bufs {
		want.Write(wire.AppendFlat(nil, b.Bytes, b.Splices))
	}
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(peer)
		got <- b
	}()

	var iov []iovec
	stops := 0
	deadline := time.Now().Add(10 * time.Second)
	inSplice := 0 // stops inside a buffer with splices
	for rest, off := bufs, 0; len(rest) > 0; {
		require.True(t, time.Now().Before(deadline), "the peer stopped reading")
		sent, at, err := writeAll(fds[0], &iov, rest, off)
		require.NoError(t, err)
		if sent == len(rest) {
			assert.Zero(t, at)
			break
		}
		stops++
		require.Less(t, at, rest[sent].Len(), "it stopped inside the buffer, not at its end")
		if len(rest[sent].Splices) > 0 && at > 0 {
			inSplice++
		}
		for i := range iov[:cap(iov)] {
			assert.Nil(t, iov[:cap(iov)][i].Base, "no pointer into a frame kept")
		}
		// The rest, from where it stopped.
		rest, off = rest[sent:], at
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
	assert.Positive(t, inSplice, "no write stopped inside a frame with splices")
}
