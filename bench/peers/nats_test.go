package peers

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsMaxPending is the JetStream async publish window: how many publishes
// may await their PubAck before PublishAsync stalls. 4000 is the nats.go
// default.
var natsMaxPending = flag.Int("peers.natspending", 4000, "JetStream PublishAsyncMaxPending")

const natsSubject = "bench.peers"

// natsClient publishes with the jetstream package's PublishAsync to an
// embedded nats-server with JetStream: one stream, memory storage, one
// subject, one replica. Acknowledgements come to the ack handler (stream
// sequence numbers), errors to the error handler; the futures are not read.
//
// When the window is full, PublishAsync waits for room up to its stall
// wait (200ms by default) and then gives up with ErrTooManyStalledMsgs;
// send then calls it again, so the sender waits on the window as long as
// acknowledgements keep coming (a slow broker at 1 KiB and above stalls
// longer than 200ms now and then), up to natsStallLimit.
type natsClient struct {
	js     jetstream.JetStream
	opts   []jetstream.PublishOpt // nil for the benchmarks: PublishAsync's fast path
	stalls uint64                 // PublishAsync calls that gave up on a full window
}

// natsStallLimit bounds how long send waits for room in the window before
// it reports the stall: long enough for any hiccup of an embedded server,
// short enough that a broken run fails instead of hanging.
const natsStallLimit = time.Minute

func openNATS(tb testing.TB, t *tracker) client {
	return openNATSWindow(tb, t, *natsMaxPending)
}

// openNATSWindow is openNATS with a window of pending publishes.
func openNATSWindow(tb testing.TB, t *tracker, pending int) *natsClient {
	srv, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		NoLog:     true,
		NoSigs:    true,
		JetStream: true,
		StoreDir:  tb.TempDir(),
	})
	if err != nil {
		tb.Fatal(err)
	}
	srv.Start()
	tb.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	if !srv.ReadyForConnections(10 * time.Second) {
		tb.Fatal("nats-server not ready after 10s")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(pending),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, _ *nats.Msg, ack *jetstream.PubAck) {
			t.ack(ack.Sequence)
		}),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, _ *nats.Msg, err error) {
			t.fail(err)
		}),
	)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name:     "PEERS",
		Subjects: []string{natsSubject},
		Storage:  jetstream.MemoryStorage,
		Replicas: 1,
		// Old messages make room for new ones: publishes keep being
		// stored and acknowledged while the memory in use stays bounded.
		MaxBytes: 512 << 20,
		Discard:  jetstream.DiscardOld,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return &natsClient{js: js}
}

func (c *natsClient) send(_ int, payload []byte) error {
	var since time.Time
	for {
		_, err := c.js.PublishAsync(natsSubject, payload, c.opts...)
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			return err
		}
		c.stalls++
		switch {
		case since.IsZero():
			since = time.Now()
		case time.Since(since) > natsStallLimit:
			return fmt.Errorf("window full for %v: %w", natsStallLimit, err)
		}
	}
}

func (c *natsClient) flush(ctx context.Context) error {
	select {
	case <-c.js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
