package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
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
	s, err := openNATSRead(ctx, url, topic, producer)
	if err != nil {
		return err
	}
	defer s.nc.Close()
	return natsjs.Read(ctx, s.js, s.cfg.Stream, s.filter, func(subject string, _ uint64, r broker.Record) error {
		return fn(topic, s.producer(subject), r)
	})
}

// natsRead is a connection to the stream a nats:// -store value names, for
// reading the records of one topic (and producer).
type natsRead struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	st     jetstream.Stream
	cfg    natsjs.Config
	filter string // the subjects of the topic (and producer)
}

// openNATSRead connects for read; the caller closes s.nc.
func openNATSRead(ctx context.Context, url, topic, producer string) (*natsRead, error) {
	nc, cfg, err := natsjs.Dial(url)
	if err != nil {
		return nil, err
	}
	s := &natsRead{nc: nc, cfg: cfg}
	if s.js, err = jetstream.New(nc); err != nil {
		nc.Close()
		return nil, err
	}
	// A stream under another prefix holds nothing under this one: say so
	// rather than print nothing.
	if s.st, err = s.js.Stream(ctx, cfg.Stream); err != nil {
		nc.Close()
		return nil, fmt.Errorf("stream %q: %w", cfg.Stream, err)
	}
	if err := natsjs.CheckPrefix(s.st.CachedInfo().Config, cfg.Prefix); err != nil {
		nc.Close()
		return nil, err
	}
	s.filter = natsjs.TopicSubjects(cfg.Prefix, topic)
	if producer != "" {
		s.filter = natsjs.Subject(cfg.Prefix, topic, producer)
	}
	return s, nil
}

// producer returns the producer name of a record's subject.
func (s *natsRead) producer(subject string) string {
	_, p, _ := natsjs.ParseSubject(s.cfg.Prefix, subject)
	return p
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
