package tcp_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inflightmq/inflight/internal/testkit"

	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/transport/tcp"
	"github.com/inflightmq/inflight/wire"
)

const waitTimeout = 10 * time.Second

var waitUntil = testkit.WaitUntil

// newProducer dials addr and returns a producer closed at the end of the
// test.
func newProducer(t *testing.T, addr string, opts ...core.Option) (*core.Producer, *testkit.ErrLog) {
	t.Helper()
	d, err := tcp.NewDialer(addr)
	require.NoError(t, err)
	return testkit.NewProducer(t, d, d.Close, uniqueName(t.Name()), opts...)
}

// rawConn is a hand-driven client for testing a server with bad input.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	rb []byte
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, waitTimeout)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

func (r *rawConn) write(b []byte) {
	r.t.Helper()
	_, err := r.nc.Write(b)
	require.NoError(r.t, err)
}

func (r *rawConn) hello(name string) {
	r.t.Helper()
	h, err := wire.AppendHello(nil, wire.Hello{Version: wire.Version, MaxFrameSize: wire.DefaultMaxFrameSize, Producer: name, Topic: wire.DefaultTopic})
	require.NoError(r.t, err)
	r.write(h)
	f := r.read()
	typ, err := wire.TypeOf(f)
	require.NoError(r.t, err)
	require.Equal(r.t, wire.TypeHelloOK, typ)
}

// read returns the next frame, or nil at EOF.
func (r *rawConn) read() []byte {
	r.t.Helper()
	require.NoError(r.t, r.nc.SetReadDeadline(time.Now().Add(waitTimeout)))
	buf := make([]byte, 64<<10)
	for {
		frame, n, err := wire.Split(r.rb, wire.DefaultMaxFrameSize)
		require.NoError(r.t, err)
		if frame != nil {
			out := append([]byte(nil), frame...)
			r.rb = r.rb[n:]
			return out
		}
		k, err := r.nc.Read(buf)
		r.rb = append(r.rb, buf[:k]...)
		if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err) {
			if len(r.rb) == 0 {
				return nil
			}
			continue
		}
		require.NoError(r.t, err)
	}
}

// expectError reads the ERROR frame the server sends before it closes, and
// the close.
func (r *rawConn) expectError(code wire.ErrorCode) {
	r.t.Helper()
	f := r.read()
	require.NotNil(r.t, f, "connection closed without an ERROR frame")
	e, err := wire.DecodeError(f)
	require.NoError(r.t, err)
	require.Equal(r.t, code, e.Code, "ERROR text: %s", e.Text)
	require.Nil(r.t, r.read(), "connection not closed after ERROR")
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

func batchFrame(first uint64, recs ...[]byte) []byte {
	var bb wire.BatchBuilder
	bb.Reset(nil, first)
	for _, r := range recs {
		bb.Add(r)
	}
	return bb.Finish()
}

var nameSeq atomic.Int64

// uniqueName keeps names distinct across -count runs against the shared
// server's store.
func uniqueName(base string) string { return fmt.Sprintf("%s-%d", base, nameSeq.Add(1)) }
