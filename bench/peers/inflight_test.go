package peers

import (
	"context"
	"flag"
	"testing"
	"time"

	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/loopback"
	"github.com/inflightmq/inflight/transport"
)

// inflightClient is an inflight Producer with its defaults (MaxPending
// 65536, MaxPendingBytes 64 MiB, natural batching, no compression; frames
// as -peers.batchbytes and -peers.batchmessages say) against a broker that
// counts what it stores.
//
// It makes one Message per payload of the run before the run (prepare),
// and sends it for every send of that payload (with one payload, one
// Message over and over): the producer only reads a Message and the
// payload is never modified, which the API allows (see core.Message).
// Other clients need a fresh record per message; inflight does not.
type inflightClient struct {
	p    *core.Producer
	msgs []*core.Message // by the payload's index in the run
	cb   core.Callback
}

func openInflightMem(tb testing.TB, t *tracker) client { return openInflight(tb, t, "mem") }
func openInflightTCP(tb testing.TB, t *tracker) client { return openInflight(tb, t, "tcp") }

// openInflightStdnet is inflight over TCP too, through transport/stdnet
// (the standard library's net, the Go runtime's poller) rather than
// transport/tcp (gnet's event loop, whose blocking epoll_wait holds a P
// while it waits: on two cores, half the machine).
func openInflightStdnet(tb testing.TB, t *tracker) client { return openInflight(tb, t, "stdnet") }

func openInflight(tb testing.TB, t *tracker, name string) client {
	env, err := loopback.Open(name)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(env.Close)
	return newInflight(tb, t, env.Dialer)
}

var (
	batchBytes    = flag.Int("peers.batchbytes", 0, "inflight's MaxBatchBytes; 0: its default")
	batchMessages = flag.Int("peers.batchmessages", 0, "inflight's MaxBatchMessages; 0: its default")
	zeroCopyMin   = flag.Int("peers.zerocopymin", -1, "inflight's ZeroCopyMin; -1: its default, 0: payloads copied")
)

func newInflight(tb testing.TB, t *tracker, d transport.Dialer) *inflightClient {
	opts := []core.Option{core.Name("peers")}
	if *batchBytes != 0 {
		opts = append(opts, core.MaxBatchBytes(*batchBytes))
	}
	if *batchMessages != 0 {
		opts = append(opts, core.MaxBatchMessages(*batchMessages))
	}
	if *zeroCopyMin >= 0 {
		opts = append(opts, core.ZeroCopyMin(*zeroCopyMin))
	}
	p, err := core.New(d, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.Close(ctx)
	})
	c := &inflightClient{p: p}
	c.cb = func(id core.MessageID, _ *core.Message, err error) {
		if err != nil {
			t.fail(err)
			return
		}
		t.ack(uint64(id))
	}
	return c
}

func (c *inflightClient) prepare(payloads [][]byte) {
	c.msgs = make([]*core.Message, len(payloads))
	for i, p := range payloads {
		c.msgs[i] = &core.Message{Payload: p}
	}
}

// send sends the Message prepare made for payload i.
func (c *inflightClient) send(i int, _ []byte) error {
	return c.p.SendAsync(context.Background(), c.msgs[i], c.cb)
}

func (c *inflightClient) flush(ctx context.Context) error { return c.p.Flush(ctx) }
