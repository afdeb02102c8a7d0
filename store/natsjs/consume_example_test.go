package natsjs_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/store/natsjs"
	"github.com/inflightmq/inflight/store/natsjs/natsjstest"
	"github.com/inflightmq/inflight/transport/mem"
)

// A NATS consumer reads what inflight stored: one message per record on
// PREFIX.<topic>.<producer>, the payload as data, the sequence ID, key and
// event time in headers, the user's headers as NATS headers. Nothing from
// inflight is needed to read it; this one is a plain nats.go ordered
// consumer on "inflight.orders.>".
func Example_consume() {
	dir, err := os.MkdirTemp("", "natsjs-consume")
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

	// A producer stores two records of topic orders.eu through the store.
	store, err := natsjs.Open(ctx, "nats://"+cluster.URLs()[len("nats://"):]+"/INFLIGHT")
	if err != nil {
		log.Fatal(err)
	}
	b, err := broker.New(store)
	if err != nil {
		log.Fatal(err)
	}
	d := mem.NewDialer(b)
	p, err := core.New(d, core.Topic("orders.eu"), core.Name("svc-1"))
	if err != nil {
		log.Fatal(err)
	}
	for _, order := range []string{"42", "43"} {
		m := &core.Message{Payload: []byte(`{"order":` + order + `}`), Key: []byte("order-" + order),
			Headers: []core.Header{{Key: "src", Value: []byte("web")}}}
		if _, err := p.Send(ctx, m); err != nil {
			log.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		log.Fatal(err)
	}
	d.Close()
	store.Close()

	// Any NATS client reads them: here nats.go.
	nc, err := nats.Connect(cluster.URLs())
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	cons, err := js.OrderedConsumer(ctx, "INFLIGHT", jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{"inflight.orders.>"},
	})
	if err != nil {
		log.Fatal(err)
	}
	for range 2 {
		m, err := cons.Next()
		if err != nil {
			log.Fatal(err)
		}
		h := m.Headers()
		// The subject is inflight.<topic tokens>.<producer>.
		producer := m.Subject()[strings.LastIndexByte(m.Subject(), '.')+1:]
		fmt.Println(m.Subject(), producer, h.Get("Inflight-Seq"), h.Get("Inflight-Key"), h.Get("src"), string(m.Data()))
	}
	// Output:
	// inflight.orders.eu.svc-1 svc-1 1 order-42 web {"order":42}
	// inflight.orders.eu.svc-1 svc-1 2 order-43 web {"order":43}
}
