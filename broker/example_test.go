package broker_test

import (
	"context"
	"fmt"
	"log"
	"sync"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/transport/mem"
)

// printStore is a Store that prints what it stores. A real one writes
// somewhere durable before Append returns: the broker acknowledges records
// only then, and it deduplicates resends with LastSeq.
type printStore struct {
	mu   sync.Mutex
	last map[string]uint64 // by producer
}

func (s *printStore) LastSeq(producer string) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last[producer], nil
}

func (s *printStore) Append(producer string, first uint64, records [][]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range records { // r is valid only during the call
		fmt.Printf("%s #%d: %s\n", producer, first+uint64(i), r)
	}
	s.last[producer] = first + uint64(len(records)) - 1
	return nil
}

// A broker over a Store of your own.
func Example_customStore() {
	ctx := context.Background()
	b, err := broker.New(&printStore{last: map[string]uint64{}})
	if err != nil {
		log.Fatal(err)
	}
	d := mem.NewDialer(b)
	defer d.Close()
	p, err := core.New(d, core.Name("orders"))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)

	for _, order := range []string{"espresso", "croissant"} {
		if _, err := p.Send(ctx, &core.Message{Payload: []byte(order)}); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// orders #1: espresso
	// orders #2: croissant
}
