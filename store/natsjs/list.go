package natsjs

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// Pair is one (topic, producer) of a stream and how many messages it has
// there (records in the native layout; in the packed one, a message holds
// many).
type Pair struct {
	Topic, Producer string
	Messages        uint64
}

// List returns the (topic, producer) pairs with messages under prefix in
// stream, sorted by topic then producer. It fails with an error wrapping
// ErrPrefix when the stream does not capture prefix.> (see CheckPrefix).
func List(ctx context.Context, js jetstream.JetStream, stream, prefix string) ([]Pair, error) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("inflight: natsjs: stream %q: %w", stream, err)
	}
	if err := CheckPrefix(st.CachedInfo().Config, prefix); err != nil {
		return nil, err
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(prefix+".>"))
	if err != nil {
		return nil, fmt.Errorf("inflight: natsjs: stream %q: %w", stream, err)
	}
	var pairs []Pair
	for subj, n := range info.State.Subjects {
		if topic, producer, ok := ParseSubject(prefix, subj); ok {
			pairs = append(pairs, Pair{topic, producer, n})
		}
	}
	slices.SortFunc(pairs, func(a, b Pair) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return strings.Compare(a.Producer, b.Producer)
	})
	return pairs, nil
}

// CheckPrefix says (an error wrapping ErrPrefix) when a stream of
// configuration cfg does not capture prefix.>, naming the prefixes it
// does capture: a reader told the wrong prefix would read nothing.
func CheckPrefix(cfg jetstream.StreamConfig, prefix string) error {
	if slices.Contains(cfg.Subjects, prefix+".>") || slices.Contains(cfg.Subjects, ">") {
		return nil
	}
	var prefixes []string
	for _, s := range cfg.Subjects {
		if p, ok := strings.CutSuffix(s, ".>"); ok && !strings.HasPrefix(p, fenceRoot+".") {
			prefixes = append(prefixes, p)
		}
	}
	if len(prefixes) == 0 {
		return fmt.Errorf("%w: stream %q captures %q, not %q", ErrPrefix, cfg.Name, cfg.Subjects, prefix+".>")
	}
	return fmt.Errorf("%w: stream %q captures %q, not %q: its prefix is %q (add ?prefix=%s to the URL)",
		ErrPrefix, cfg.Name, cfg.Subjects, prefix+".>", strings.Join(prefixes, `" or "`), prefixes[0])
}
