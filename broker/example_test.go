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
// somewhere durable before Append and Fence return: the broker
// acknowledges records only then, deduplicates resends with State's
// LastSeq, and fences older producer instances with the epoch.
type printStore struct {
	mu    sync.Mutex
	state map[[2]string]broker.NameState // by topic and producer
}

func (s *printStore) State(topic, producer string) (broker.NameState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state[[2]string{topic, producer}], nil
}

func (s *printStore) Fence(topic, producer string, epoch uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state[[2]string{topic, producer}]
	if epoch <= st.Epoch {
		return 0, broker.ErrFenced
	}
	st.Epoch = epoch
	s.state[[2]string{topic, producer}] = st
	return st.LastSeq, nil
}

func (s *printStore) Append(topic, producer string, epoch uint64, recs []broker.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state[[2]string{topic, producer}]
	if epoch < st.Epoch {
		return broker.ErrFenced // a newer instance of this producer took the name over
	}
	for _, r := range recs { // r's slices are valid only during the call
		fmt.Printf("%s/%s #%d key=%s: %s\n", topic, producer, r.Seq, r.Key, r.Payload)
	}
	st.LastSeq = recs[len(recs)-1].Seq
	s.state[[2]string{topic, producer}] = st
	return nil
}

// A broker over a Store of your own.
func Example_customStore() {
	ctx := context.Background()
	b, err := broker.New(&printStore{state: map[[2]string]broker.NameState{}})
	if err != nil {
		log.Fatal(err)
	}
	d := mem.NewDialer(b)
	defer d.Close()
	p, err := core.New(d, core.Name("till-1"), core.Topic("orders"))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)

	for _, order := range []string{"espresso", "croissant"} {
		msg := &core.Message{Payload: []byte(order), Key: []byte("table-7")}
		if _, err := p.Send(ctx, msg); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// orders/till-1 #1 key=table-7: espresso
	// orders/till-1 #2 key=table-7: croissant
}
