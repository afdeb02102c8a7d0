package server_test

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/server"
	"github.com/inflightmq/inflight/wire"
)

// modes are the two ways a stdnet pair talks.
var modes = []struct {
	name string
	tls  bool
}{{"plain", false}, {"tls", true}}

func TestSendAndReceive(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			e := newEnv(t, m.tls)
			p, _ := newProducer(t, e.addr(), e.dialOpts())
			const n = 20000
			done := make(chan error, n)
			for i := range n {
				require.NoError(t, p.SendAsync(context.Background(), &core.Message{Payload: []byte{byte(i)}},
					func(_ core.MessageID, _ *core.Message, err error) { done <- err }))
			}
			for range n {
				require.NoError(t, <-done)
			}
			require.NoError(t, p.Close(context.Background()))
			require.Equal(t, n, e.store.Len(p.Name()))
		})
	}
}

// TestBadPeers: garbage, an oversized length prefix, a frame before
// HELLO, a bad CRC, a slowloris sender and an idle one each get an ERROR
// frame and are closed, alone; a good producer on the same server is
// unaffected, and no connection buffers more than a frame.
func TestBadPeers(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			e := newEnv(t, m.tls, server.ReadTimeout(100*time.Millisecond), server.IdleTimeout(300*time.Millisecond),
				server.HandshakeTimeout(waitTimeout)) // handshakes are slow under -race on a busy machine
			p, _ := newProducer(t, e.addr(), e.dialOpts(), core.Heartbeat(50*time.Millisecond))
			cases := []struct {
				name string
				run  func(r *rawConn)
				code wire.ErrorCode
			}{
				{"garbage", func(r *rawConn) { r.write([]byte{0, 0, 0, 5, 0xee, 1, 2, 3, 4}) }, wire.CodeProtocol},
				{"oversized length prefix", func(r *rawConn) { r.write([]byte{0xff, 0xff, 0xff, 0xff}) }, wire.CodeFrameTooLarge},
				{"zero length prefix", func(r *rawConn) { r.write([]byte{0, 0, 0, 0}) }, wire.CodeProtocol},
				{"batch before hello", func(r *rawConn) { r.write(batchFrame(1, []byte("x"))) }, wire.CodeHelloRequired},
				{"bad CRC", func(r *rawConn) {
					r.hello(uniqueName("bad-crc"))
					f := batchFrame(1, []byte("payload"))
					f[len(f)-1] ^= 0xff
					r.write(f)
				}, wire.CodeChecksum},
				{"slowloris prefix", func(r *rawConn) { r.write([]byte{0, 0}) }, wire.CodeProtocol},
				{"slowloris body", func(r *rawConn) { r.write([]byte{0, 0, 0, 100, byte(wire.TypeHello), 0}) }, wire.CodeProtocol},
				{"large frame trickled", func(r *rawConn) { r.write([]byte{0, 1, 0, 0, byte(wire.TypeHello)}) }, wire.CodeProtocol},
				{"idle", func(r *rawConn) {}, wire.CodeProtocol},
			}
			before := e.server.Stats()
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					r := dialRaw(t, e)
					tc.run(r)
					r.expectError(tc.code)
					_, err := p.Send(context.Background(), &core.Message{Payload: []byte(tc.name)})
					require.NoError(t, err, "the good producer is unaffected")
				})
			}
			st := e.server.Stats()
			assert.Equal(t, int64(5), st.Errors-before.Errors)
			assert.Equal(t, int64(4), st.Timeouts-before.Timeouts)
			assert.Less(t, st.MaxBuffered, int64(e.broker.MaxFrameSize()), "what a connection holds stays under the frame limit")
			assert.Equal(t, len(cases), e.store.Len(p.Name()))
		})
	}
}

// TestMaxConns: a connection beyond the limit gets an ERROR frame and
// is closed; the ones within it are served.
func TestMaxConns(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			e := newEnv(t, m.tls, server.MaxConns(1))
			first := dialRaw(t, e)
			first.hello(uniqueName("first"))
			dialRaw(t, e).expectError(wire.CodeProtocol)
			assert.Equal(t, int64(1), e.server.Stats().Refused)
			first.nc.Close()
			waitUntil(t, "the first connection to go", func() bool { return e.server.Stats().Conns == 0 })
			dialRaw(t, e).hello(uniqueName("third"))
		})
	}
}

// TestClose: Close stops accepting, ends every connection and
// its goroutines (goleak checks at exit), and a second Close returns nil.
// A producer connected at the time reconnects to the next server on the
// same address and delivers everything exactly once.
func TestClose(t *testing.T) {
	store := broker.NewMemoryStore()
	b, _ := broker.New(store)
	srv, err := server.New("127.0.0.1:0", b)
	require.NoError(t, err)
	addr := srv.Addr().String()
	p, _ := newProducer(t, addr, nil, core.SendTimeout(5*time.Second))
	const n = 2000
	var wg sync.WaitGroup
	send := func(from, to int) {
		for i := from; i < to; i++ {
			wg.Add(1)
			require.NoError(t, p.SendAsync(context.Background(), &core.Message{Payload: []byte{byte(i)}},
				func(_ core.MessageID, _ *core.Message, err error) { assert.NoError(t, err); wg.Done() }))
		}
	}
	send(0, n/2)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, srv.Close(ctx))
	require.NoError(t, srv.Close(ctx), "a second Close")
	_, err = net.DialTimeout("tcp", addr, time.Second)
	require.Error(t, err, "no longer accepting")

	send(n/2, n)
	b2, _ := broker.New(store)
	srv2, err := server.New(addr, b2)
	require.NoError(t, err)
	defer srv2.Close(context.Background())
	wg.Wait()
	require.Equal(t, n, store.Len(p.Name()), "each message stored exactly once")
}

func TestOptions(t *testing.T) {
	b, _ := broker.New(broker.NewMemoryStore())
	_, err := server.New("127.0.0.1:0", nil)
	assert.ErrorIs(t, err, server.ErrInvalidOption)
	for _, o := range []server.Option{server.MaxConns(0), server.MaxPendingConns(0), server.ReadTimeout(0), server.IdleTimeout(-1),
		server.WriteTimeout(0), server.HandshakeTimeout(0), server.TLS(nil), server.TLS(&tls.Config{}), server.RequireClientCert(nil),
		server.RequireClientCert(newCA(t).Pool), nil} {
		_, err = server.New("127.0.0.1:0", b, o)
		assert.ErrorIs(t, err, server.ErrInvalidOption)
	}
	_, err = server.New("256.0.0.1:0", b)
	assert.Error(t, err, "a bad address fails to listen")
}
