package broker_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/transport/mem"
)

// A broker with an access list: alice may write topic orders as the
// producers till-*, bob as pos-*. The list holds the SHA-256 of each token
// (broker.TokenHash), not the token. Over a network, send tokens over TLS
// only (transport/stdnet).
func Example_accessList() {
	ctx := context.Background()
	acl, err := broker.ParseACL(strings.NewReader(`
# identity  credential                  topics  producer names
alice       ` + broker.TokenHash("alice's token") + `  orders  till-*
bob         ` + broker.TokenHash("bob's token") + `  orders  pos-*
`))
	if err != nil {
		log.Fatal(err)
	}
	b, err := broker.New(broker.NewMemoryStore(), broker.WithACL(acl))
	if err != nil {
		log.Fatal(err)
	}
	d := mem.NewDialer(b)
	defer d.Close()

	alice, err := core.New(d, core.Topic("orders"), core.Name("till-1"), core.Token("alice's token"))
	if err != nil {
		log.Fatal(err)
	}
	defer alice.Close(ctx)
	id, err := alice.Send(ctx, &core.Message{Payload: []byte("espresso")})
	fmt.Println("alice as till-1:", id, err)

	refused := make(chan error, 1)
	bob, err := core.New(d, core.Topic("orders"), core.Name("till-2"), core.Token("bob's token"),
		core.ErrorHandler(func(err error) {
			select {
			case refused <- err:
			default:
			}
		}))
	if err != nil {
		log.Fatal(err)
	}
	defer bob.Close(ctx)
	fmt.Println("bob as till-2 refused:", errors.Is(<-refused, core.ErrUnauthorized))
	// Output:
	// alice as till-1: 1 <nil>
	// bob as till-2 refused: true
}
