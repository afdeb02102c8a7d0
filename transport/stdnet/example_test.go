package stdnet_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/transport/stdnet"
)

// A broker served over TLS, with client certificates required, and a
// producer that presents one. (Compiled, not run: it reads certificate
// files.)
func Example() {
	ctx := context.Background()
	var clientCAs, roots *x509.CertPool // the CAs each side trusts; roots nil: the system's

	b, _ := broker.New(broker.NewMemoryStore())
	cert, err := tls.LoadX509KeyPair("server.pem", "server-key.pem")
	if err != nil {
		log.Fatal(err)
	}
	srv, err := stdnet.NewServer("0.0.0.0:7443", b,
		stdnet.ServerTLS(&tls.Config{Certificates: []tls.Certificate{cert}}), // TLS 1.3 unless MinVersion says otherwise
		stdnet.RequireClientCert(clientCAs))                                  // optional: mutual TLS
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close(ctx)
	// After renewing the files (on SIGHUP, say), without a restart:
	_ = srv.ReloadCertificateFiles("server.pem", "server-key.pem")

	clientCert, _ := tls.LoadX509KeyPair("producer.pem", "producer-key.pem")
	d, err := stdnet.NewDialer("broker.example.com:7443", stdnet.ClientTLS(&tls.Config{
		RootCAs:      roots,
		Certificates: []tls.Certificate{clientCert}, // for mutual TLS
	}))
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	p, err := core.New(d) // a refused certificate reaches core.ErrorHandler as stdnet.ErrHandshake
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)
}
