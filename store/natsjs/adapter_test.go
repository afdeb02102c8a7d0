//go:build !inflight_storev2

package natsjs_test

// The broker on this branch still takes the Store of before topics and
// metadata: LastSeq(producer) and Append(producer, first, [][]byte). Until
// the message-model branch brings LastSeq(topic, producer) and
// Append(topic, producer, []broker.Record), the end-to-end tests and the
// benchmarks reach the natsjs Store through this adapter, with one topic.
// Once it has landed, build with -tags inflight_storev2 (adapter_v2_test.go
// passes the Store to broker.New as it is and gives producers their topic),
// then delete this file and the tag.

import (
	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/store/natsjs"
)

// brokerStore returns what broker.New takes for s, every producer on topic;
// after, if not nil, runs after every Append.
func brokerStore(s *natsjs.Store, topic string, after func()) broker.Store {
	return adapter{s, topic, after}
}

// producerOptions returns the options that make a producer write topic.
func producerOptions(string) []core.Option { return nil }

type adapter struct {
	s     *natsjs.Store
	topic string
	after func()
}

func (a adapter) LastSeq(producer string) (uint64, error) { return a.s.LastSeq(a.topic, producer) }

func (a adapter) Append(producer string, first uint64, records [][]byte) error {
	recs := make([]broker.Record, len(records))
	for i, r := range records {
		recs[i] = broker.Record{Seq: first + uint64(i), Payload: r}
	}
	if a.after != nil {
		defer a.after()
	}
	return a.s.Append(a.topic, producer, recs)
}
