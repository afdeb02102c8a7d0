package tcp_test

import (
	"context"
	"fmt"
	"log"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/server"
	"github.com/inflightmq/inflight/transport/tcp"
)

// A broker served over TCP and a producer dialling it.
func Example() {
	ctx := context.Background()
	b, err := broker.New(broker.NewMemoryStore())
	if err != nil {
		log.Fatal(err)
	}
	srv, err := server.New("127.0.0.1:0", b) // port 0: any free port
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close(ctx)

	d, err := tcp.NewDialer(srv.Addr().String()) // one event loop for its connections
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	p, err := core.New(d)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)

	id, err := p.Send(ctx, &core.Message{Payload: []byte("hello")})
	fmt.Println(id, err)
	// Output: 1 <nil>
}
