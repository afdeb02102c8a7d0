package inflightprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/inflightmq/inflight/core"
)

// ProducerSource is what NewProducerCollector reads; *core.Producer is one.
type ProducerSource interface {
	Name() string
	Stats() core.Stats
}

// NewProducerCollector returns a collector of p's Stats, each metric labelled
// producer=p.Name(). Register one collector per producer. Safe for
// concurrent scrapes.
func NewProducerCollector(p ProducerSource) prometheus.Collector {
	t := table[core.Stats]{prefix: "inflight_producer_", labels: prometheus.Labels{"producer": p.Name()}}
	t.gauge("pending_messages", "Messages enqueued whose callback has not run yet.",
		func(s core.Stats) float64 { return float64(s.Pending) })
	t.gauge("pending_bytes", "Payload bytes of the pending messages.",
		func(s core.Stats) float64 { return float64(s.PendingBytes) })
	t.gauge("unacked_messages", "Messages written to a connection and not yet acknowledged.",
		func(s core.Stats) float64 { return float64(s.Unacked) })
	t.counter("sent_messages_total", "Messages written to a connection, resends included.",
		func(s core.Stats) float64 { return float64(s.Sent) })
	t.counter("acked_messages_total", "Messages whose callback reported success.",
		func(s core.Stats) float64 { return float64(s.Acked) })
	t.counter("timed_out_messages_total", "Messages whose callback reported ErrTimeout.",
		func(s core.Stats) float64 { return float64(s.TimedOut) })
	t.counter("canceled_messages_total", "Messages whose callback reported their context's error.",
		func(s core.Stats) float64 { return float64(s.Canceled) })
	t.counter("failed_messages_total", "Messages whose callback reported ErrClosed or ErrMessageTooLarge.",
		func(s core.Stats) float64 { return float64(s.Failed) })
	t.counter("reconnects_total", "Connections established after the first.",
		func(s core.Stats) float64 { return float64(s.Reconnects) })
	t.counter("batches_total", "BATCH frames written.",
		func(s core.Stats) float64 { return float64(s.Batches) })
	t.counter("batch_raw_bytes_total", "BATCH frame bytes before compression.",
		func(s core.Stats) float64 { return float64(s.BytesRaw) })
	t.counter("batch_wire_bytes_total", "BATCH frame bytes as written.",
		func(s core.Stats) float64 { return float64(s.BytesWire) })
	return &statsCollector[core.Stats]{stats: p.Stats, metrics: t.out}
}
