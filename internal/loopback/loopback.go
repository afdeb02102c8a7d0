// Package loopback starts a broker, storing into a CountingStore, behind one
// transport in this process: the fixture the benchmarks, the peer
// comparison and the plot program share.
package loopback

import (
	"context"
	"fmt"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/internal/testcert"
	"github.com/inflightmq/inflight/server"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/transport/mem"
	"github.com/inflightmq/inflight/transport/stdnet"
	"github.com/inflightmq/inflight/transport/tcp"
)

// Transports names what Open accepts.
var Transports = []string{"mem", "tcp", "stdnet", "stdnet-tls"}

// Env is a broker reachable through one transport.
type Env struct {
	Dialer transport.Dialer
	Store  *broker.CountingStore
	// Cut drops every open connection; producers redial.
	Cut   func()
	close func()
}

// Open starts a broker behind transport "mem" (a mem.Dialer), "tcp" (a
// server.Server on 127.0.0.1:0 and a tcp.Dialer to it), "stdnet" (the same
// with a stdnet.Dialer) or "stdnet-tls" (stdnet over TLS 1.3, with a
// certificate from a CA made for the run). Close stops both.
func Open(name string) (*Env, error) {
	store := broker.NewCountingStore()
	b, err := broker.New(store)
	if err != nil {
		return nil, err
	}
	switch name {
	case "mem":
		d := mem.NewDialer(b)
		return &Env{Dialer: d, Store: store, Cut: d.DropConnections, close: func() { d.Close() }}, nil
	case "tcp":
		return serve(store, b, nil, func(addr string) (dialer, error) { return tcp.NewDialer(addr) })
	case "stdnet":
		return serve(store, b, nil, func(addr string) (dialer, error) { return stdnet.NewDialer(addr) })
	case "stdnet-tls":
		ca, err := testcert.NewCA("loopback")
		if err != nil {
			return nil, err
		}
		cfg, err := ca.ServerConfig()
		if err != nil {
			return nil, err
		}
		return serve(store, b, []server.Option{server.TLS(cfg)}, func(addr string) (dialer, error) {
			return stdnet.NewDialer(addr, stdnet.ClientTLS(ca.ClientConfig()))
		})
	}
	return nil, fmt.Errorf("loopback: unknown transport %q (want one of %v)", name, Transports)
}

// dialer is a transport.Dialer that is closed.
type dialer interface {
	transport.Dialer
	Close() error
}

// serve starts a server for b and a dialer to it.
func serve(store *broker.CountingStore, b *broker.Broker, opts []server.Option, dial func(addr string) (dialer, error)) (*Env, error) {
	srv, err := server.New("127.0.0.1:0", b, opts...)
	if err != nil {
		return nil, err
	}
	d, err := dial(srv.Addr().String())
	if err != nil {
		srv.Close(context.Background())
		return nil, err
	}
	return &Env{Dialer: d, Store: store, Cut: srv.CloseConns, close: func() {
		d.Close()
		srv.Close(context.Background())
	}}, nil
}

// Close stops the dialer, then the server. Close producers first.
func (e *Env) Close() { e.close() }
