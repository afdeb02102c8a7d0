package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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

// scanNATS calls fn for every record of topic (and of producer, if not
// empty) stored in the stream a nats:// -store value names, in stream order,
// up to the last message present when it starts.
func scanNATS(ctx context.Context, url, topic, producer string, fn func(topic, producer string, r broker.Record) error) error {
	nc, cfg, err := natsjs.Dial(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	// A stream under another prefix holds nothing under this one: say so
	// rather than print nothing.
	st, err := js.Stream(ctx, cfg.Stream)
	if err != nil {
		return fmt.Errorf("stream %q: %w", cfg.Stream, err)
	}
	if err := natsjs.CheckPrefix(st.CachedInfo().Config, cfg.Prefix); err != nil {
		return err
	}
	filter := natsjs.TopicSubjects(cfg.Prefix, topic)
	if producer != "" {
		filter = natsjs.Subject(cfg.Prefix, topic, producer)
	}
	return natsjs.Read(ctx, js, cfg.Stream, filter, func(subject string, _ uint64, r broker.Record) error {
		_, prod, _ := natsjs.ParseSubject(cfg.Prefix, subject)
		return fn(topic, prod, r)
	})
}

// listNATS returns the (topic, producer) pairs of the stream a nats://
// -store value names, with their message counts.
func listNATS(ctx context.Context, url string) ([]natsjs.Pair, error) {
	nc, cfg, err := natsjs.Dial(url)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	return natsjs.List(ctx, js, cfg.Stream, cfg.Prefix)
}
