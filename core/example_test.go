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

// A producer sends to a broker in this process; over TCP only the dialer
// changes (see transport/tcp).
func Example() {
	ctx := context.Background()
	b, err := broker.New(broker.NewMemoryStore())
	if err != nil {
		log.Fatal(err)
	}
	d := mem.NewDialer(b) // or tcp.NewDialer("host:port")
	defer d.Close()

	p, err := core.New(d, core.Name("example"), core.SendTimeout(5*time.Second))
	if err != nil {
		log.Fatal(err) // options are validated
	}

	// SendAsync returns at once; the callback runs exactly once, on the
	// producer's callback goroutine, successes in send order.
	for _, text := range []string{"one", "two"} {
		msg := &core.Message{Payload: []byte(text)}
		err := p.SendAsync(ctx, msg, func(id core.MessageID, m *core.Message, err error) {
			fmt.Printf("%s: id %d, err %v\n", m.Payload, id, err)
		})
		if err != nil { // not enqueued (ErrQueueFull, ErrClosed, ...): no callback
			log.Fatal(err)
		}
	}

	// Send waits for its own outcome, not for earlier callbacks.
	id, err := p.Send(ctx, &core.Message{Payload: []byte("three")})

	// Flush waits until every callback of what was sent before it returned;
	// Close drains, then fails what is left with ErrClosed.
	if err := p.Flush(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("three: id %d, err %v\n", id, err)
	if err := p.Close(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// one: id 1, err <nil>
	// two: id 2, err <nil>
	// three: id 3, err <nil>
}
