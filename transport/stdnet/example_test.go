package stdnet_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log"

	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/transport/stdnet"
)

// A producer that connects over TLS and presents a client certificate (the
// broker's side is package server). (Compiled, not run: it reads
// certificate files.)
func Example() {
	ctx := context.Background()
	var roots *x509.CertPool // the CAs the producer trusts; nil: the system's

	clientCert, err := tls.LoadX509KeyPair("producer.pem", "producer-key.pem")
	if err != nil {
		log.Fatal(err)
	}
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
