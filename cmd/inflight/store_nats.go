package main

import (
	"context"
	"strings"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/store/natsjs"
)

// isNATSStore reports whether a -store value names a NATS JetStream stream.
func isNATSStore(s string) bool {
	return strings.HasPrefix(s, "nats://") || strings.HasPrefix(s, "tls://")
}

// openNATSStore connects to NATS and creates or checks the stream (at most
// 30 s), for -store nats://HOST:PORT[,HOST:PORT...]/STREAM[?options]; see
// natsjs.Open for the options. The broker then keeps no state of its own:
// any number of `inflight serve` may serve the same producers.
func openNATSStore(ctx context.Context, url string) (broker.Store, func() error, error) {
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := natsjs.Open(octx, url)
	if err != nil {
		return nil, nil, err
	}
	return s, func() error { s.Close(); return nil }, nil
}
