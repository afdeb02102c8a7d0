package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/store/file"
	"github.com/inflightmq/inflight/store/natsjs/layout"
)

// followFile calls fn for every record of the file store at path, from the
// oldest, then for each new one as it is stored, until ctx ends (its error
// is returned) or fn fails. removed hears of the segments retention removed
// before they were read (file.ErrSegmentsRemoved); the reading goes on.
func followFile(ctx context.Context, path string, fn func(topic, producer string, r broker.Record) error, removed func(error)) error {
	r, err := file.OpenReader(path, file.Position{})
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		rec, err := r.Next(ctx)
		if errors.Is(err, file.ErrSegmentsRemoved) {
			removed(err)
			continue
		}
		if err != nil {
			return err
		}
		if err := fn(rec.Topic, rec.Producer, rec.Record); err != nil {
			return err
		}
	}
}

// followNATS calls fn for every record of topic (and of producer, if not
// empty) in the stream a nats:// -store value names, in stream order, then
// for each new one as it is stored, until ctx ends (its error is returned)
// or fn fails. It reads through an ordered consumer, which the server
// forgets once it is done.
func followNATS(ctx context.Context, url, topic, producer string, fn func(topic, producer string, r broker.Record) error) error {
	s, err := openNATSRead(ctx, url, topic, producer)
	if err != nil {
		return err
	}
	defer s.nc.Close()
	cons, err := s.st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{s.filter}})
	if err != nil {
		return fmt.Errorf("follow %s: %w", s.filter, err)
	}
	// At most this many bytes on their way at once, and at least four of
	// the largest messages, so that a slow terminal never gets the
	// consumer cut off as slow.
	it, err := cons.Messages(jetstream.PullMaxBytes(max(8<<20, 4*int(s.nc.MaxPayload()))))
	if err != nil {
		return fmt.Errorf("follow %s: %w", s.filter, err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("follow %s: %w", s.filter, err)
		}
		prod := s.producer(m.Subject())
		if err := layout.DecodeMessage(m.Headers(), m.Data(), func(r broker.Record) error { return fn(topic, prod, r) }); err != nil {
			return fmt.Errorf("follow %s: %w", m.Subject(), err)
		}
	}
}
