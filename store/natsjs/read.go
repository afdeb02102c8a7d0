package natsjs

import (
	"context"
	"fmt"
	"strings"

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
//
// At most readAhead bytes are on their way to the client at any time, so a
// reader that falls behind (a busy machine, a slow fn) is never cut off by
// the server as a slow consumer (its max_pending, 64 MiB by default): asking
// for a thousand packed messages of up to 1 MiB each at once is what made
// `inflight demo -engine nats` stall until its deadline.
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
	last := info.State.LastSeq // messages stored after Read started are not read
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		return fmt.Errorf("inflight: natsjs: read %s: %w", filter, err)
	}
	// One ordered consumer for the whole read: Fetch on an ordered consumer
	// makes a new consumer on the server every call. Next follows ctx, and
	// Stop ends a reset of the consumer that would otherwise retry for ever.
	it, err := cons.Messages(jetstream.PullMaxBytes(readAhead(js)))
	if err != nil {
		return fmt.Errorf("inflight: natsjs: read %s: %w", filter, err)
	}
	defer it.Stop()
	stopOnDone := context.AfterFunc(ctx, it.Stop)
	defer stopOnDone()
	for got := uint64(0); got < want; {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return fmt.Errorf("inflight: natsjs: read %s: after %d of %d messages: %w", filter, got, want, err)
		}
		subject := m.Subject()
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("inflight: natsjs: %s: %w", subject, err)
		}
		seq := md.Sequence.Stream
		if seq > last {
			return nil
		}
		got++
		err = layout.DecodeMessage(m.Headers(), m.Data(), func(r broker.Record) error { return fn(subject, seq, r) })
		if err != nil {
			return fmt.Errorf("inflight: natsjs: %s message %d: %w", subject, seq, err)
		}
		if md.NumPending == 0 { // fewer than counted: some aged out meanwhile
			return nil
		}
	}
	return nil
}

// readAhead is how many bytes Read lets the server send before the client
// took them: room for several of the largest messages the server accepts,
// and far below its default per-client max_pending (64 MiB).
func readAhead(js jetstream.JetStream) int {
	return max(8<<20, 4*int(js.Conn().MaxPayload()))
}
