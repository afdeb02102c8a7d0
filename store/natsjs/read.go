package natsjs

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/store/natsjs/layout"
)

// TopicSubjects returns the filter subject of every producer of topic under
// prefix: prefix.Token(topic).*
func TopicSubjects(prefix, topic string) string { return prefix + "." + Token(topic) + ".*" }

// ParseSubject returns the topic and producer of a store subject under
// prefix; ok is false for a subject the store does not write.
func ParseSubject(prefix, subject string) (topic, producer string, ok bool) {
	rest, found := strings.CutPrefix(subject, prefix+".")
	if !found {
		return "", "", false
	}
	t, p, found := strings.Cut(rest, ".")
	if !found || strings.Contains(p, ".") {
		return "", "", false
	}
	if topic, ok = Name(t); !ok {
		return "", "", false
	}
	producer, ok = Name(p)
	return topic, producer, ok
}

// Read calls fn for every record stored on the subjects filter matches (a
// Subject, or TopicSubjects for a whole topic) in stream order, up to the
// last message present when Read started, with the subject and stream
// sequence of the record's message. The record's slices are valid
// only during the call. It reads through an ordered consumer (no state on
// the server once done) and stops at fn's first error, ctx's end, or a
// message that does not decode (an error wrapping layout.ErrMalformed).
func Read(ctx context.Context, js jetstream.JetStream, stream, filter string, fn func(subject string, streamSeq uint64, r broker.Record) error) error {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("inflight: natsjs: stream %q: %w", stream, err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return fmt.Errorf("inflight: natsjs: stream %q: %w", stream, err)
	}
	var want uint64
	for _, n := range info.State.Subjects {
		want += n
	}
	if want == 0 {
		return nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		return fmt.Errorf("inflight: natsjs: read %s: %w", filter, err)
	}
	for got, fails := uint64(0), 0; got < want; {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch, err := cons.Fetch(int(min(want-got, 1000)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			// The ordered consumer recreates itself after a failover: retry
			// a few times.
			if fails++; fails > 10 {
				return fmt.Errorf("inflight: natsjs: read %s: %w", filter, err)
			}
			continue
		}
		fails = 0
		for m := range batch.Messages() {
			got++
			subject := m.Subject()
			md, err := m.Metadata()
			if err != nil {
				return fmt.Errorf("inflight: natsjs: %s: %w", subject, err)
			}
			seq := md.Sequence.Stream
			err = layout.DecodeMessage(m.Headers(), m.Data(), func(r broker.Record) error { return fn(subject, seq, r) })
			if err != nil {
				return fmt.Errorf("inflight: natsjs: %s message %d: %w", subject, seq, err)
			}
		}
	}
	return nil
}
