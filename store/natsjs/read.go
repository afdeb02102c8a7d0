package natsjs

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/store/natsjs/layout"
)

// Read calls fn for every record stored on the subjects filter matches (a
// Subject, or TopicSubjects for a whole topic) in stream order, up to the
// last message present when Read started, with the subject and stream
// sequence of the record's message. The record's slices are valid
// only during the call. It reads through an ordered consumer (no state on
// the server once done) and stops at fn's first error, ctx's end, or a
// message that does not decode (an error wrapping layout.ErrMalformed).
//
// When the server reports nothing pending before the messages counted at
// the start were all read (some aged out meanwhile, or its count lags a
// leader change), Read waits settleWait for more, then counts again: nil if
// the subjects hold no more than it read. If they hold more, the consumer
// stalled (seen right after a stream leader was lost twice: it delivered
// what the stream held before and then nothing, saying nothing was
// pending): Read goes on with a new one from the message after the last it
// read, up to maxResumes times, then fails; never a silent partial read.
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
	r := reader{st: st, filter: filter, last: info.State.LastSeq, want: want, ahead: readAhead(js), fn: fn}
	for resumes := 0; ; resumes++ {
		stalled, err := r.read(ctx)
		if err != nil || !stalled {
			return err
		}
		if resumes == maxResumes {
			return fmt.Errorf("inflight: natsjs: read %s: %d of %d messages, and no more came within %v although the stream holds %d (%d new consumers tried)",
				filter, r.got, want, settleWait, r.holds, maxResumes)
		}
	}
}

// maxResumes is how many times Read goes on with a new consumer after one
// stalled.
const maxResumes = 3

// reader is one Read: what it has read so far, across its consumers.
type reader struct {
	st     jetstream.Stream
	filter string
	last   uint64 // the stream's last message when Read started: later ones are not read
	want   uint64 // messages on filter when Read started
	ahead  int
	fn     func(subject string, streamSeq uint64, r broker.Record) error

	got   uint64 // messages read
	next  uint64 // the stream sequence to go on from (0: the start)
	holds uint64 // messages on filter when the last consumer stalled
}

// read reads through one ordered consumer from r.next until every message
// was read (false, nil) or the consumer stalled with messages left (true).
func (r *reader) read(ctx context.Context) (stalled bool, err error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{r.filter}}
	if r.next > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, r.next
	}
	cons, err := r.st.OrderedConsumer(ctx, cfg)
	if err != nil {
		return false, fmt.Errorf("inflight: natsjs: read %s: %w", r.filter, err)
	}
	// One ordered consumer for the whole read: Fetch on an ordered consumer
	// makes a new consumer on the server every call. Next follows ctx, and
	// Stop ends a reset of the consumer that would otherwise retry for ever.
	it, err := cons.Messages(jetstream.PullMaxBytes(r.ahead))
	if err != nil {
		return false, fmt.Errorf("inflight: natsjs: read %s: %w", r.filter, err)
	}
	defer it.Stop()
	stopOnDone := context.AfterFunc(ctx, it.Stop)
	defer stopOnDone()
	short := false // the server said nothing was left before want
	for r.got < r.want {
		nctx, cancel := ctx, context.CancelFunc(func() {})
		if short {
			nctx, cancel = context.WithTimeout(ctx, settleWait)
		}
		m, err := it.Next(jetstream.NextContext(nctx))
		cancel()
		if err != nil && short && ctx.Err() == nil {
			// Nothing more came: believe the server if the subjects now
			// hold no more than what was read (the rest aged out).
			n, cerr := count(ctx, r.st, r.filter)
			if cerr == nil && n <= r.got {
				return false, nil
			}
			r.holds = n
			return true, nil
		}
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return false, fmt.Errorf("inflight: natsjs: read %s: after %d of %d messages: %w", r.filter, r.got, r.want, err)
		}
		subject := m.Subject()
		md, err := m.Metadata()
		if err != nil {
			return false, fmt.Errorf("inflight: natsjs: %s: %w", subject, err)
		}
		seq := md.Sequence.Stream
		if seq > r.last {
			return false, nil
		}
		r.got++
		r.next = seq + 1
		err = layout.DecodeMessage(m.Headers(), m.Data(), func(rec broker.Record) error { return r.fn(subject, seq, rec) })
		if err != nil {
			return false, fmt.Errorf("inflight: natsjs: %s message %d: %w", subject, seq, err)
		}
		// Fewer than counted: some aged out meanwhile, or the server's
		// count of what is pending lags a leader change. Wait a little for
		// more before believing it.
		short = md.NumPending == 0
	}
	return false, nil
}

// settleWait is how long Read waits for more messages once the server said
// none is pending, before it counts again.
const settleWait = 2 * time.Second

// count returns how many messages the stream holds on the subjects of
// filter.
func count(ctx context.Context, st jetstream.Stream, filter string) (uint64, error) {
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n, nil
}

// readAhead is how many bytes Read lets the server send before the client
// took them: room for several of the largest messages the server accepts,
// and far below its default per-client max_pending (64 MiB).
func readAhead(js jetstream.JetStream) int {
	return max(8<<20, 4*int(js.Conn().MaxPayload()))
}
