//go:build inflight_storev2

package natsjs_test

// With the broker's Store of topics and metadata (see adapter_test.go):
// broker.New takes the natsjs Store as it is.

import (
	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/store/natsjs"
)

func brokerStore(s *natsjs.Store, _ string, after func()) broker.Store {
	if after == nil {
		return s
	}
	return hooked{s, after}
}

type hooked struct {
	*natsjs.Store
	after func()
}

func (h hooked) Append(topic, producer string, recs []broker.Record) error {
	defer h.after()
	return h.Store.Append(topic, producer, recs)
}

func producerOptions(topic string) []core.Option { return []core.Option{core.Topic(topic)} }
