package natsjs_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/store/natsjs"
	"github.com/inflightmq/inflight/store/natsjs/natsjstest"
)

// TestReadBoundsBytesInFlight: Read of a stream three times larger than
// what the server holds for one client (max_pending, here 16 MiB) reads
// every record in order, and the server never cuts the reader off as a
// slow consumer. Asking for up to a thousand packed messages at once (the
// old Read) let tens of megabytes queue on the server; on a busy machine
// that cost the connection, and `inflight demo -engine nats` sat silent
// until its deadline.
func TestReadBoundsBytesInFlight(t *testing.T) {
	c := startCluster(t, 1, natsjstest.Options{MaxPending: 16 << 20})
	ensureStream(t, c, natsjs.StreamConfig{Storage: jetstream.MemoryStorage})
	s := newStore(t, c, natsjs.Config{})
	// 50 Appends of 60 records of 16 KiB: one message of about 1 MiB each.
	payload := bytes.Repeat([]byte("r"), 16<<10)
	const appends, perAppend = 50, 60
	seq := uint64(0)
	for range appends {
		recs := make([]broker.Record, perAppend)
		for i := range recs {
			seq++
			recs[i] = broker.Record{Seq: seq, Payload: payload}
		}
		if err := s.Append("t", "p", 0, recs); err != nil {
			t.Fatal(err)
		}
	}
	js, err := jetstream.New(connect(t, c))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got uint64
	err = natsjs.Read(ctx, js, streamName, s.Subject("t", "p"), func(_ string, _ uint64, r broker.Record) error {
		got++
		if r.Seq != got || !bytes.Equal(r.Payload, payload) {
			t.Fatalf("record %d: seq %d, %d payload bytes", got, r.Seq, len(r.Payload))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got != seq {
		t.Errorf("read %d records, want %d", got, seq)
	}
	if n := c.SlowConsumers(); n != 0 {
		t.Errorf("the server cut %d slow consumers off", n)
	}
}
