package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/server"
)

// A broker served over TLS, with client certificates required. (Compiled,
// not run: it reads certificate files.)
func Example() {
	var clientCAs *x509.CertPool // the CAs that sign producers' certificates

	b, err := broker.New(broker.NewMemoryStore())
	if err != nil {
		log.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair("server.pem", "server-key.pem")
	if err != nil {
		log.Fatal(err)
	}
	srv, err := server.New("0.0.0.0:7443", b,
		server.TLS(&tls.Config{Certificates: []tls.Certificate{cert}}), // TLS 1.3 unless MinVersion says otherwise
		server.RequireClientCert(clientCAs))                            // optional: mutual TLS
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close(context.Background())
	// After renewing the files (on SIGHUP, say), without a restart:
	_ = srv.ReloadCertificateFiles("server.pem", "server-key.pem")
}
