package server_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/testcert"
	"github.com/inflightmq/inflight/server"
	"github.com/inflightmq/inflight/wire"
)

// refusals records what a Server reports to OnRefused.
type refusals struct {
	mu  sync.Mutex
	got []server.Refusal
}

func (r *refusals) add(x server.Refusal) {
	r.mu.Lock()
	r.got = append(r.got, x)
	r.mu.Unlock()
}

// count returns how many refusals wrap target.
func (r *refusals) count(target error) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, x := range r.got {
		if errors.Is(x.Err, target) {
			n++
		}
	}
	return n
}

// wait waits for the n-th refusal that wraps target and returns it.
func (r *refusals) wait(t *testing.T, target error, n int) server.Refusal {
	t.Helper()
	var found server.Refusal
	waitUntil(t, "a refusal: "+target.Error(), func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		k := 0
		for _, x := range r.got {
			if errors.Is(x.Err, target) {
				if k++; k == n {
					found = x
					return true
				}
			}
		}
		return false
	})
	require.NotNil(t, found.Addr)
	return found
}

// expectErrorText reads the ERROR frame the server sends before it closes,
// checks its code and that its text says want, and the close. The text is
// the reason of the server's error (wire.Reason): a server error is wanted
// as wire.Reason(err).
func (r *rawConn) expectErrorText(code wire.ErrorCode, want string) {
	r.t.Helper()
	f := r.read()
	require.NotNil(r.t, f, "connection closed without an ERROR frame")
	e, err := wire.DecodeError(f)
	require.NoError(r.t, err)
	require.Equal(r.t, code, e.Code, "ERROR text: %s", e.Text)
	require.Contains(r.t, e.Text, want)
	require.Nil(r.t, r.read(), "connection not closed after ERROR")
}

// dialPlain connects to addr without TLS, whatever the server speaks.
func dialPlain(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, waitTimeout)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

// dialTLS connects to addr with cfg (the TLS handshake done, from the
// client's side: with TLS 1.3 the server may still refuse the client's
// certificate).
func dialTLS(t *testing.T, addr string, cfg *tls.Config) *rawConn {
	t.Helper()
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: waitTimeout}, Config: cfg}
	nc, err := d.DialContext(context.Background(), "tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

func helloBytes(t *testing.T, name string) []byte {
	t.Helper()
	h, err := wire.AppendHello(nil, wire.Hello{Version: wire.Version, MaxFrameSize: wire.DefaultMaxFrameSize, Producer: name})
	require.NoError(t, err)
	return h
}

// TestPreHelloConnectionClosed: before its HELLO a connection may send
// nothing else, and only for HandshakeTimeout. A client that PINGs instead
// (once every 50ms, which IdleTimeout alone never closed) is refused at its
// first PING; a silent one is closed at the handshake deadline, long
// before IdleTimeout; both over plain TCP and over TLS with client
// certificates and an access list. A flood of connections that never send a
// HELLO, at the pending limit and at MaxConns, does not keep a producer
// out: the newest connection takes the oldest pending one's place.
func TestPreHelloConnectionClosed(t *testing.T) {
	const handshake = 2 * time.Second // a TLS handshake under -race on a busy machine fits
	pingOnly := func(t *testing.T, r *rawConn) {
		start := time.Now()
		ping := wire.AppendPing(nil, wire.Ping{Nonce: 1})
		closed := make(chan struct{})
		var wg sync.WaitGroup
		defer wg.Wait()
		defer close(closed)
		wg.Go(func() {
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for {
				if _, err := r.nc.Write(ping); err != nil {
					return
				}
				select {
				case <-tick.C:
				case <-closed:
					return
				}
			}
		})
		r.expectErrorText(wire.CodeHelloRequired, "PING before HELLO")
		assert.Less(t, time.Since(start), handshake, "closed within the handshake deadline")
	}
	silent := func(t *testing.T, r *rawConn) {
		start := time.Now()
		r.expectErrorText(wire.CodeProtocol, wire.Reason(server.ErrHandshakeTimeout))
		took := time.Since(start)
		assert.Less(t, took, handshake+time.Second, "closed at the handshake deadline")
		t.Logf("a silent connection was closed after %v (handshake timeout %v)", took.Round(time.Millisecond), handshake)
	}

	t.Run("plain", func(t *testing.T) {
		e := newEnv(t, false, server.HandshakeTimeout(handshake), server.IdleTimeout(time.Hour))
		pingOnly(t, dialRaw(t, e))
		silent(t, dialRaw(t, e))
		waitUntil(t, "both gone", func() bool { return e.server.Stats().Conns == 0 })
		st := e.server.Stats()
		assert.Equal(t, int64(1), st.HandshakeTimeouts)
		assert.Equal(t, int64(1), st.Errors)
		assert.Zero(t, st.Pending)
	})

	t.Run("tls with an access list", func(t *testing.T) {
		serverCA, clientCA := newCA(t), newCA(t)
		scfg, err := serverCA.ServerConfig()
		require.NoError(t, err)
		acl, err := broker.ParseACL(strings.NewReader("alice cert:alice orders till-*\n"))
		require.NoError(t, err)
		b, err := broker.New(broker.NewMemoryStore(), broker.WithACL(acl))
		require.NoError(t, err)
		srv, err := server.New("127.0.0.1:0", b, server.TLS(scfg), server.RequireClientCert(clientCA.Pool),
			server.HandshakeTimeout(handshake), server.IdleTimeout(time.Hour))
		require.NoError(t, err)
		defer srv.Close(context.Background())
		cert, err := clientCA.Client("alice")
		require.NoError(t, err)
		cfg := serverCA.ClientConfig()
		cfg.Certificates = []tls.Certificate{cert}

		pingOnly(t, dialTLS(t, srv.Addr().String(), cfg))
		silent(t, dialTLS(t, srv.Addr().String(), cfg))

		// The same client with a HELLO is served, and then its PINGs
		// keep it open.
		r := dialTLS(t, srv.Addr().String(), cfg)
		r.write(func() []byte {
			h, err := wire.AppendHello(nil, wire.Hello{Version: wire.Version, MaxFrameSize: wire.DefaultMaxFrameSize, Producer: "till-1"})
			require.NoError(t, err)
			return h
		}())
		typ, err := wire.TypeOf(r.read())
		require.NoError(t, err)
		require.Equal(t, wire.TypeHelloOK, typ)
		r.write(wire.AppendPing(nil, wire.Ping{Nonce: 9}))
		typ, err = wire.TypeOf(r.read())
		require.NoError(t, err)
		require.Equal(t, wire.TypePong, typ)
	})

	t.Run("flood at the limits", func(t *testing.T) {
		rec := &refusals{}
		// The flood's connections would live for waitTimeout: only
		// their eviction lets the producer in.
		e := newEnv(t, false, server.MaxConns(5), server.MaxPendingConns(3), server.HandshakeTimeout(waitTimeout),
			server.IdleTimeout(time.Hour), server.OnRefused(rec.add))
		for i := range 2 { // two producers hold two slots
			dialRaw(t, e).hello(uniqueName("held"))
			waitUntil(t, "the producer past its HELLO", func() bool { return e.server.Stats().Conns == i+1 })
		}
		var flood []*rawConn
		for i := range 6 { // 3 fill the pending limit and MaxConns; 3 more take the oldest ones' places
			flood = append(flood, dialRaw(t, e))
			waitUntil(t, "the flood's connection registered", func() bool {
				st := e.server.Stats()
				return st.Accepted == int64(3+i) && st.Pending == min(i+1, 3)
			})
		}
		for _, r := range flood[:3] {
			r.expectErrorText(wire.CodeProtocol, wire.Reason(server.ErrTooManyPending))
		}
		st := e.server.Stats()
		assert.Equal(t, 5, st.Conns)
		assert.Equal(t, 3, st.Pending)

		p, _ := newProducer(t, e.addr(), nil)
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		_, err := p.Send(ctx, &core.Message{Payload: []byte("served")})
		require.NoError(t, err, "a producer gets in despite the flood")
		assert.Equal(t, 1, e.store.Len(p.Name()))
		// The evicted connection's own goroutine reports its refusal: it
		// may do so after the producer was served.
		waitUntil(t, "the fourth refusal reported", func() bool {
			return e.server.Stats().RefusedPending == 4 && rec.count(server.ErrTooManyPending) == 4
		})
		assert.Zero(t, e.server.Stats().Refused, "no connection past its HELLO was refused")
		flood[3].expectErrorText(wire.CodeProtocol, wire.Reason(server.ErrTooManyPending))
	})
}

// TestRefusalsLoggedAndCounted: every connection the server refuses, or
// closes before its HELLO, is reported to OnRefused once with its cause and
// counted under it in Stats: too many connections, too many pending ones,
// a handshake timeout (plain and TLS), a TLS handshake that failed (no
// client certificate, an expired one, one from an unknown CA: the TLS reason
// is in the error), plain TCP on the TLS port, whose client reads an ERROR
// frame that says the server expects TLS, as a producer without TLS reports.
func TestRefusalsLoggedAndCounted(t *testing.T) {
	rec := &refusals{}
	plain := newEnv(t, false, server.MaxConns(2), server.MaxPendingConns(1), server.HandshakeTimeout(300*time.Millisecond),
		server.IdleTimeout(time.Hour), server.OnRefused(rec.add))

	a := dialRaw(t, plain)
	waitUntil(t, "a pending", func() bool { return plain.server.Stats().Pending == 1 })
	b := dialRaw(t, plain) // takes a's place
	a.expectErrorText(wire.CodeProtocol, wire.Reason(server.ErrTooManyPending))
	rec.wait(t, server.ErrTooManyPending, 1)
	b.expectErrorText(wire.CodeProtocol, wire.Reason(server.ErrHandshakeTimeout))
	r := rec.wait(t, server.ErrHandshakeTimeout, 1)
	assert.Contains(t, r.Err.Error(), "300ms")

	dialRaw(t, plain).hello(uniqueName("one"))
	dialRaw(t, plain).hello(uniqueName("two"))
	dialRaw(t, plain).expectErrorText(wire.CodeProtocol, wire.Reason(server.ErrTooManyConns))
	rec.wait(t, server.ErrTooManyConns, 1)

	serverCA, clientCA, stranger := newCA(t), newCA(t), newCA(t)
	scfg, err := serverCA.ServerConfig()
	require.NoError(t, err)
	tlsEnv := func(handshake time.Duration) *server.Server {
		b, err := broker.New(broker.NewMemoryStore())
		require.NoError(t, err)
		srv, err := server.New("127.0.0.1:0", b, server.TLS(scfg), server.RequireClientCert(clientCA.Pool),
			server.HandshakeTimeout(handshake), server.OnRefused(rec.add))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, srv.Close(context.Background())) })
		return srv
	}
	srv := tlsEnv(waitTimeout)
	addr := srv.Addr().String()
	withCert := func(ca *testcert.CA, l testcert.Leaf) *tls.Config {
		cfg := serverCA.ClientConfig()
		if ca != nil {
			l.Client = true
			cert, err := ca.Issue(l)
			require.NoError(t, err)
			cfg.Certificates = []tls.Certificate{cert}
		}
		return cfg
	}
	now := time.Now()
	for i, tc := range []struct {
		name   string
		cfg    *tls.Config
		reason string
	}{
		{"no client certificate", withCert(nil, testcert.Leaf{}), "didn't provide a certificate"},
		{"unknown CA", withCert(stranger, testcert.Leaf{CommonName: "eve"}), "unknown authority"},
		{"expired", withCert(clientCA, testcert.Leaf{CommonName: "old", NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-time.Hour)}), "expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dialTLS(t, addr, tc.cfg)
			r := rec.wait(t, server.ErrTLSHandshake, i+1)
			assert.Contains(t, r.Err.Error(), tc.reason)
			t.Logf("refused: %v", r.Err)
		})
	}

	t.Run("plain TCP on the TLS port", func(t *testing.T) {
		r := dialPlain(t, addr)
		r.write(helloBytes(t, uniqueName("plain")))
		r.expectErrorText(wire.CodeProtocol, "the server expects TLS")
		rec.wait(t, server.ErrNotTLS, 1)
	})

	t.Run("TLS handshake timeout", func(t *testing.T) {
		short := tlsEnv(300 * time.Millisecond)
		before := time.Now()
		dialPlain(t, short.Addr().String()) // connects, and never says a word
		r := rec.wait(t, server.ErrHandshakeTimeout, 2)
		t.Logf("closed after %v: %v", time.Since(before).Round(time.Millisecond), r.Err)
		assert.Equal(t, int64(1), short.Stats().HandshakeTimeouts)
	})

	// Each refusal was reported once, under one cause, and counted there.
	st, ts := plain.server.Stats(), srv.Stats()
	assert.Equal(t, int64(1), st.RefusedPending)
	assert.Equal(t, int64(1), st.HandshakeTimeouts)
	assert.Equal(t, int64(1), st.Refused)
	assert.Equal(t, int64(3), ts.HandshakeErrors)
	assert.Equal(t, int64(1), ts.NotTLS)
	assert.Zero(t, ts.HandshakeTimeouts+ts.Refused+ts.RefusedPending)
	for target, n := range map[error]int{server.ErrTooManyPending: 1, server.ErrHandshakeTimeout: 2,
		server.ErrTooManyConns: 1, server.ErrTLSHandshake: 3, server.ErrNotTLS: 1} {
		assert.Equal(t, n, rec.count(target), "%v", target)
	}
	rec.mu.Lock()
	assert.Len(t, rec.got, 8, "one report per refused connection")
	rec.mu.Unlock()

	t.Run("a producer without TLS is told", func(t *testing.T) {
		p, log := newProducer(t, addr, nil, core.SendTimeout(300*time.Millisecond))
		_, err := p.Send(context.Background(), &core.Message{Payload: []byte("x")})
		require.ErrorIs(t, err, core.ErrTimeout)
		// The producer keeps redialing: it is told at its first attempt's
		// end, which on a loaded host may come after the Send's timeout.
		var told error
		waitUntil(t, "the producer told the server expects TLS", func() bool {
			told = log.Find(func(err error) bool { return strings.Contains(err.Error(), "the server expects TLS") })
			return told != nil
		})
		t.Logf("the producer reports: %v", told)
	})
}
