package mem_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/transport/mem"
)

// In a test of your own code, swap the TCP dialer for a mem.Dialer and break
// the connection on purpose: here the broker becomes unreachable, a message
// fails by its deadline all the same, and the producer reconnects once the
// broker is back.
func ExampleDialer_DropConnections() {
	ctx := context.Background()
	b, err := broker.New(broker.NewMemoryStore())
	if err != nil {
		log.Fatal(err)
	}
	d := mem.NewDialer(b)
	defer d.Close()
	p, err := core.New(d, core.ReconnectBackoff(time.Millisecond, 10*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)

	_, err = p.Send(ctx, &core.Message{Payload: []byte("before")})
	fmt.Println("before:", err)

	d.RefuseDials(true) // the broker is unreachable...
	d.DropConnections() // ...and the open connection is cut
	soon, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = p.Send(soon, &core.Message{Payload: []byte("during")})
	cancel()
	fmt.Println("during: timed out:", errors.Is(err, core.ErrTimeout), "by ctx:", errors.Is(err, context.DeadlineExceeded))

	d.RefuseDials(false)
	_, err = p.Send(ctx, &core.Message{Payload: []byte("after")})
	fmt.Println("after:", err, "reconnects:", p.Stats().Reconnects)
	// Output:
	// before: <nil>
	// during: timed out: true by ctx: true
	// after: <nil> reconnects: 1
}
