package server_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/internal/testcert"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/server"
	"github.com/inflightmq/inflight/transport/stdnet"
	"github.com/inflightmq/inflight/wire"
)

const waitTimeout = 10 * time.Second

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// env is a broker behind a Server, closed at the end of the test.
type env struct {
	store  *broker.MemoryStore
	broker *broker.Broker
	server *server.Server
	ca     *testcert.CA // nil: plain TCP
}

// newEnv starts a server: over TLS with a certificate from a fresh CA if
// withTLS, plain otherwise.
func newEnv(t *testing.T, withTLS bool, opts ...server.Option) *env {
	t.Helper()
	e := &env{store: broker.NewMemoryStore()}
	var err error
	e.broker, err = broker.New(e.store)
	require.NoError(t, err)
	if withTLS {
		e.ca = newCA(t)
		cfg, err := e.ca.ServerConfig()
		require.NoError(t, err)
		opts = append([]server.Option{server.TLS(cfg)}, opts...)
	}
	e.server, err = server.New("127.0.0.1:0", e.broker, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		require.NoError(t, e.server.Close(ctx))
	})
	return e
}

func newCA(t *testing.T) *testcert.CA {
	t.Helper()
	ca, err := testcert.NewCA(t.Name())
	require.NoError(t, err)
	return ca
}

func (e *env) addr() string { return e.server.Addr().String() }

// dialOpts are the options a client of e needs: trust in e's CA.
func (e *env) dialOpts() []stdnet.DialOption {
	if e.ca == nil {
		return nil
	}
	return []stdnet.DialOption{stdnet.ClientTLS(e.ca.ClientConfig())}
}

var nameSeq atomic.Int64

func uniqueName(base string) string { return fmt.Sprintf("%s-%d", base, nameSeq.Add(1)) }

// rawConn is a hand-driven client for testing a server with bad input.
type rawConn struct {
	t   *testing.T
	nc  net.Conn
	rb  []byte
	eof bool
}

// dialRaw connects to e, with TLS if e has it.
func dialRaw(t *testing.T, e *env) *rawConn {
	t.Helper()
	var nc net.Conn
	var err error
	if e.ca != nil {
		d := tls.Dialer{NetDialer: &net.Dialer{Timeout: waitTimeout}, Config: e.ca.ClientConfig()}
		nc, err = d.DialContext(context.Background(), "tcp", e.addr())
	} else {
		nc, err = net.DialTimeout("tcp", e.addr(), waitTimeout)
	}
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
	h, err := wire.AppendHello(nil, wire.Hello{Version: wire.Version, MaxFrameSize: wire.DefaultMaxFrameSize, Producer: name})
	require.NoError(r.t, err)
	r.write(h)
	typ, err := wire.TypeOf(r.read())
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
		if r.eof {
			return nil
		}
		k, err := r.nc.Read(buf)
		r.rb = append(r.rb, buf[:k]...)
		if err != nil && !isTimeout(err) {
			r.eof = true // the peer closed (or reset): what came before still counts
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

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func batchFrame(first uint64, recs ...[]byte) []byte {
	var bb wire.BatchBuilder
	bb.Reset(nil, 0, first)
	for _, r := range recs {
		bb.Add(r)
	}
	return bb.Finish()
}
