package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/testcert"
	"github.com/inflightmq/inflight/server"
	"github.com/inflightmq/inflight/transport/stdnet"
)

// TestBadCertificateRefused: a server whose certificate is expired, signed
// by a CA the producer does not trust, or issued for another host is
// refused. The producer's ErrorHandler sees ErrHandshake and the x509
// reason; the producer keeps redialing; its messages time out as usual.
func TestBadCertificateRefused(t *testing.T) {
	ca := newCA(t)
	other := newCA(t)
	cases := []struct {
		name  string
		cert  func() (tls.Certificate, error)
		match func(error) bool
	}{
		{"expired", ca.Expired, func(err error) bool {
			var e x509.CertificateInvalidError
			return errors.As(err, &e) && e.Reason == x509.Expired
		}},
		{"wrong CA", other.Server, func(err error) bool {
			var e x509.UnknownAuthorityError
			return errors.As(err, &e)
		}},
		{"wrong host", ca.WrongHost, func(err error) bool {
			var e x509.HostnameError
			return errors.As(err, &e)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cert, err := tc.cert()
			require.NoError(t, err)
			b, _ := broker.New(broker.NewMemoryStore())
			srv, err := server.New("127.0.0.1:0", b, server.TLS(&tls.Config{Certificates: []tls.Certificate{cert}}))
			require.NoError(t, err)
			defer srv.Close(context.Background())

			const timeout = 150 * time.Millisecond
			p, log := newProducer(t, srv.Addr().String(), []stdnet.DialOption{stdnet.ClientTLS(ca.ClientConfig())}, core.SendTimeout(timeout))
			start := time.Now()
			_, err = p.Send(context.Background(), &core.Message{Payload: []byte("x")})
			require.ErrorIs(t, err, core.ErrTimeout)
			assert.Less(t, time.Since(start), timeout+time.Second, "times out as usual")
			waitUntil(t, "a few dials", func() bool { return srv.Stats().HandshakeErrors >= 3 })
			bad := log.Find(func(err error) bool { return errors.Is(err, stdnet.ErrHandshake) && tc.match(err) })
			require.NotNil(t, bad, "reported %v", log.Snapshot())
			t.Logf("the producer reports: %v", bad)
		})
	}
}

// TestMutualTLS: with RequireClientCert, a producer with a certificate from
// the client CA is served; one without a certificate, or with one from
// another CA, is refused and told why, and keeps redialing.
func TestMutualTLS(t *testing.T) {
	serverCA, clientCA, stranger := newCA(t), newCA(t), newCA(t)
	scfg, err := serverCA.ServerConfig()
	require.NoError(t, err)
	store := broker.NewMemoryStore()
	b, _ := broker.New(store)
	srv, err := server.New("127.0.0.1:0", b, server.TLS(scfg), server.RequireClientCert(clientCA.Pool))
	require.NoError(t, err)
	defer srv.Close(context.Background())
	addr := srv.Addr().String()

	clientConfig := func(ca *testcert.CA) *tls.Config {
		cfg := serverCA.ClientConfig()
		if ca != nil {
			cert, err := ca.Client("producer-a")
			require.NoError(t, err)
			cfg.Certificates = []tls.Certificate{cert}
		}
		return cfg
	}

	t.Run("client certificate from the CA", func(t *testing.T) {
		p, _ := newProducer(t, addr, []stdnet.DialOption{stdnet.ClientTLS(clientConfig(clientCA))})
		_, err := p.Send(context.Background(), &core.Message{Payload: []byte("hello")})
		require.NoError(t, err)
		assert.Equal(t, 1, store.Len(p.Name()))
	})
	for _, tc := range []struct {
		name   string
		ca     *testcert.CA
		reason string // the server's TLS alert
	}{
		{"no client certificate", nil, "certificate required"},
		{"client certificate from another CA", stranger, "unknown certificate authority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := srv.Stats().HandshakeErrors
			p, log := newProducer(t, addr, []stdnet.DialOption{stdnet.ClientTLS(clientConfig(tc.ca))}, core.SendTimeout(150*time.Millisecond))
			_, err := p.Send(context.Background(), &core.Message{Payload: []byte("x")})
			require.ErrorIs(t, err, core.ErrTimeout)
			waitUntil(t, "a few refused handshakes", func() bool { return srv.Stats().HandshakeErrors-before >= 3 })
			// TLS 1.3: the client finishes its side of the handshake before
			// the server has checked the client's certificate, so the refusal
			// arrives as the server's alert, on the first read.
			refused := log.Find(func(err error) bool {
				return errors.Is(err, stdnet.ErrHandshake) && strings.Contains(err.Error(), tc.reason)
			})
			require.NotNil(t, refused, "reported %v", log.Snapshot())
			t.Logf("the producer reports: %v", refused)
			assert.Zero(t, store.Len(p.Name()))
		})
	}
}

// TestReloadCertificate: a server whose certificate expired takes a renewed
// one without a restart; a producer that was being refused connects at its
// next dial and delivers.
func TestReloadCertificate(t *testing.T) {
	ca := newCA(t)
	expired, err := ca.Expired()
	require.NoError(t, err)
	store := broker.NewMemoryStore()
	b, _ := broker.New(store)
	srv, err := server.New("127.0.0.1:0", b, server.TLS(&tls.Config{Certificates: []tls.Certificate{expired}}))
	require.NoError(t, err)
	defer srv.Close(context.Background())

	p, _ := newProducer(t, srv.Addr().String(), []stdnet.DialOption{stdnet.ClientTLS(ca.ClientConfig())}, core.SendTimeout(waitTimeout))
	done := make(chan error, 1)
	require.NoError(t, p.SendAsync(context.Background(), &core.Message{Payload: []byte("renewed")},
		func(_ core.MessageID, _ *core.Message, err error) { done <- err }))
	waitUntil(t, "a refused handshake", func() bool { return srv.Stats().HandshakeErrors >= 1 })

	renewed, err := ca.Server()
	require.NoError(t, err)
	require.ErrorIs(t, srv.ReloadCertificate(tls.Certificate{}), server.ErrInvalidOption)
	require.NoError(t, srv.ReloadCertificate(renewed))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(waitTimeout):
		t.Fatal("not delivered after the reload")
	}
	assert.Equal(t, 1, store.Len(p.Name()))

	plain := newEnv(t, false)
	assert.ErrorIs(t, plain.server.ReloadCertificate(renewed), server.ErrNoTLS)
	assert.ErrorIs(t, plain.server.ReloadCertificateFiles("cert.pem", "key.pem"), server.ErrNoTLS)
}
