// Package loopback starts a broker, storing into a CountingStore, behind one
// transport in this process: the fixture the benchmarks, the peer
// comparison and the plot program share.
package loopback

import (
	"context"
	"fmt"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/transport/mem"
	"github.com/inflightmq/inflight/transport/tcp"
)

// Transports names what Open accepts.
var Transports = []string{"mem", "tcp"}

// Env is a broker reachable through one transport.
type Env struct {
	Dialer transport.Dialer
	Store  *broker.CountingStore
	// Cut drops every open connection; producers redial.
	Cut   func()
	close func()
}

// Open starts a broker behind transport "mem" (a mem.Dialer) or "tcp" (a
// tcp.Server on 127.0.0.1:0 and a tcp.Dialer to it). Close stops both.
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
		srv, err := tcp.NewServer("127.0.0.1:0", b)
		if err != nil {
			return nil, err
		}
		d, err := tcp.NewDialer(srv.Addr().String())
		if err != nil {
			srv.Close(context.Background())
			return nil, err
		}
		return &Env{Dialer: d, Store: store, Cut: srv.CloseConns, close: func() {
			d.Close()
			srv.Close(context.Background())
		}}, nil
	}
	return nil, fmt.Errorf("loopback: unknown transport %q (want mem or tcp)", name)
}

// Close stops the dialer, then the server. Close producers first.
func (e *Env) Close() { e.close() }
