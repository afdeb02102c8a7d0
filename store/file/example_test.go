package file_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/store/file"
)

// A Reader follows a store as it is written, beside the Store that writes
// it (here in the same process; inflight serve's, say, in another), and a
// new Reader goes on from the position after the last record handled.
func ExampleReader() {
	dir, err := os.MkdirTemp("", "inflight-reader")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "orders")
	s, err := file.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	// What a broker stores for producer till-1 (a broker calls Append).
	store := func(seq uint64, payload string) {
		if err := s.Append("orders", "till-1", 0, []broker.Record{{Seq: seq, Payload: []byte(payload)}}); err != nil {
			log.Fatal(err)
		}
	}
	store(1, "espresso")
	store(2, "croissant")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := file.OpenReader(path, file.Position{}) // the zero Position: the beginning
	if err != nil {
		log.Fatal(err)
	}
	rec, err := r.Next(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rec.Topic, rec.Producer, rec.Seq, string(rec.Payload))
	resume := rec.Resume // kept, say, in a file beside what was done with the record
	r.Close()

	store(3, "tea")
	r, err = file.OpenReader(path, resume) // later, maybe in another process
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	for range 2 {
		rec, err := r.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(rec.Topic, rec.Producer, rec.Seq, string(rec.Payload))
	}

	// At the end of the store, Next waits for the next record until its
	// context ends.
	wait, stop := context.WithTimeout(ctx, 100*time.Millisecond)
	defer stop()
	_, err = r.Next(wait)
	fmt.Println("caught up:", errors.Is(err, context.DeadlineExceeded))
	// Output:
	// orders till-1 1 espresso
	// orders till-1 2 croissant
	// orders till-1 3 tea
	// caught up: true
}
