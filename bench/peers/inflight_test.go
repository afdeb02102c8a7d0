package peers

import (
	"context"
	"testing"
	"time"

	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/loopback"
	"github.com/inflightmq/inflight/transport"
)

// inflightClient is an inflight Producer with its defaults (MaxPending
// 32768, MaxPendingBytes 64 MiB, natural batching, no compression) against
// a broker that counts what it stores.
//
// One Message is reused for every send: the producer only reads it and the
// payload is never modified, which the API allows (see core.Message).
// Other clients need a fresh record per message; inflight does not.
type inflightClient struct {
	p   *core.Producer
	msg *core.Message // made by the first send: a run sends one payload
	cb  core.Callback
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

func newInflight(tb testing.TB, t *tracker, d transport.Dialer) *inflightClient {
	p, err := core.New(d, core.Name("peers"))
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

func (c *inflightClient) send(payload []byte) error {
	if c.msg == nil {
		c.msg = &core.Message{Payload: payload}
	}
	return c.p.SendAsync(context.Background(), c.msg, c.cb)
}

func (c *inflightClient) flush(ctx context.Context) error { return c.p.Flush(ctx) }
