package inflight_test

import (
	"context"
	"crypto/tls"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/internal/testcert"
	"github.com/inflightmq/inflight/server"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/transport/stdnet"
)

// TestTLSConformance runs the suite over transport/stdnet with mutual TLS:
// the server requires a client certificate, and each restart (Down, Up)
// presents a newly issued server certificate. TestSuite runs it over
// stdnet with server-authenticated TLS ("stdnet-tls") and plain
// ("stdnet").
func TestTLSConformance(t *testing.T) {
	for _, tc := range suiteTests {
		t.Run(tc.name, func(t *testing.T) {
			f := newMutualTLSFixture(t)
			defer f.Close()
			tc.run(t, f)
		})
	}
}

// stdnetFixture: a stdnet server on loopback; Down stops it, Up starts a
// new one on the same address with the same store. With a CA, both sides
// speak TLS and every Up issues a fresh server certificate.
type stdnetFixture struct {
	t      *testing.T
	store  *broker.MemoryStore
	addr   string
	ca     *testcert.CA
	mutual bool // the server requires a client certificate from ca
	server *server.Server
	dialer *stdnet.Dialer
}

func newStdnetFixture(t *testing.T) fixture { return startStdnet(t, nil, false) }

func newTLSFixture(t *testing.T) fixture { return startStdnet(t, newTestCA(t), false) }

func newMutualTLSFixture(t *testing.T) fixture { return startStdnet(t, newTestCA(t), true) }

func newTestCA(t *testing.T) *testcert.CA {
	ca, err := testcert.NewCA(t.Name())
	require.NoError(t, err)
	return ca
}

func startStdnet(t *testing.T, ca *testcert.CA, mutual bool) *stdnetFixture {
	f := &stdnetFixture{t: t, store: broker.NewMemoryStore(), addr: "127.0.0.1:0", ca: ca, mutual: mutual}
	f.Up()
	f.addr = f.server.Addr().String()
	var opts []stdnet.DialOption
	if ca != nil {
		cfg := ca.ClientConfig()
		if mutual {
			cert, err := ca.Client("suite")
			require.NoError(t, err)
			cfg.Certificates = []tls.Certificate{cert}
		}
		opts = append(opts, stdnet.ClientTLS(cfg))
	}
	d, err := stdnet.NewDialer(f.addr, opts...)
	require.NoError(t, err)
	f.dialer = d
	return f
}

func (f *stdnetFixture) Dialer() transport.Dialer   { return f.dialer }
func (f *stdnetFixture) Store() *broker.MemoryStore { return f.store }
func (f *stdnetFixture) Cut()                       { f.server.CloseConns() }

func (f *stdnetFixture) Down() {
	require.NoError(f.t, f.server.Close(context.Background()))
}

func (f *stdnetFixture) Up() {
	b, err := broker.New(f.store)
	require.NoError(f.t, err)
	var opts []server.Option
	if f.ca != nil {
		cfg, err := f.ca.ServerConfig()
		require.NoError(f.t, err)
		opts = append(opts, server.TLS(cfg))
		if f.mutual {
			opts = append(opts, server.RequireClientCert(f.ca.Pool))
		}
	}
	f.server, err = server.New(f.addr, b, opts...)
	require.NoError(f.t, err)
}

func (f *stdnetFixture) Close() {
	_ = f.server.Close(context.Background())
	_ = f.dialer.Close()
}

// newTLSChaos puts a fault proxy between the producer and a server that
// speaks TLS, dialed by a stdnet.Dialer.
func newTLSChaos(t *testing.T) chaosNet {
	ca := newTestCA(t)
	cfg, err := ca.ServerConfig()
	require.NoError(t, err)
	return newProxyChaos(t, []server.Option{server.TLS(cfg)}, func(addr string) (closingDialer, error) {
		return stdnet.NewDialer(addr, stdnet.ClientTLS(ca.ClientConfig()))
	})
}
