package core_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/transport/mem"
)

// A producer writes any topic, each message naming its own (or none: the
// producer's Topic); each message may carry a key, ordered headers and an
// event time, stored with it.
func Example_metadata() {
	ctx := context.Background()
	store := broker.NewMemoryStore()
	b, err := broker.New(store)
	if err != nil {
		log.Fatal(err)
	}
	d := mem.NewDialer(b)
	defer d.Close()

	// Topic is the default topic (default "default"); sequence IDs and
	// dedup are per (topic, name).
	p, err := core.New(d, core.Name("checkout-1"), core.Topic("orders.eu"))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)

	_, err = p.Send(ctx, &core.Message{
		Payload:   []byte(`{"total": 42}`),
		Key:       []byte("customer-17"),                                       // optional
		Headers:   []core.Header{{Key: "traceparent", Value: []byte("00-ab")}}, // optional, ordered, keys may repeat
		EventTime: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC),                // optional, to the nanosecond
	})
	if err != nil { // a key, header or topic over its limit: ErrInvalidMessage
		log.Fatal(err)
	}
	// Another topic, on the same connection, with its own sequence IDs.
	if _, err = p.Send(ctx, &core.Message{Topic: "orders.us", Payload: []byte(`{"total": 7}`)}); err != nil {
		log.Fatal(err)
	}
	for _, r := range store.TopicRecords("orders.eu", "checkout-1") {
		fmt.Printf("orders.eu #%d key=%s %s=%s at %s: %s\n", r.Seq, r.Key, r.Headers[0].Key, r.Headers[0].Value,
			r.EventTime.UTC().Format(time.RFC3339), r.Payload)
	}
	for _, r := range store.TopicRecords("orders.us", "checkout-1") {
		fmt.Printf("orders.us #%d: %s\n", r.Seq, r.Payload)
	}
	// Output:
	// orders.eu #1 key=customer-17 traceparent=00-ab at 2026-12-03T09:00:00Z: {"total": 42}
	// orders.us #1: {"total": 7}
}
