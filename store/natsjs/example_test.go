package natsjs_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/store/natsjs"
	"github.com/inflightmq/inflight/store/natsjs/natsjstest"
	"github.com/inflightmq/inflight/transport/mem"
)

// The embedded mode: the broker runs in the producer's process on a
// JetStream store, with no gateway hop. (Here a one-server JetStream on
// 127.0.0.1 stands in for your NATS cluster.)
func Example() {
	dir, err := os.MkdirTemp("", "natsjs-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cluster, err := natsjstest.Start(dir, 1, natsjstest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Shutdown()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := natsjs.Connect(cluster.URLs()) // never buffers behind the producer's back
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := natsjs.EnsureStream(ctx, js, natsjs.StreamConfig{Name: "INFLIGHT", Replicas: 1}); err != nil {
		log.Fatal(err)
	}
	store, err := natsjs.New(ctx, nc, natsjs.Config{Stream: "INFLIGHT"})
	if err != nil {
		log.Fatal(err)
	}
	b, err := broker.New(store)
	if err != nil {
		log.Fatal(err)
	}
	d := mem.NewDialer(b)
	defer d.Close()
	p, err := core.New(d, core.Topic("orders"), core.Name("checkout-1"))
	if err != nil {
		log.Fatal(err)
	}
	id, err := p.Send(ctx, &core.Message{Payload: []byte(`{"order":42}`), Key: []byte("order-42")})
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("stored as", id, "on", store.Subject("orders", "checkout-1"))
	// Output: stored as 1 on inflight.orders.checkout-1
}
