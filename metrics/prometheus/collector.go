package inflightprom

import "github.com/prometheus/client_golang/prometheus"

// metric is one exported value of a stats snapshot S.
type metric[S any] struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(S) float64
}

// statsCollector exports the metrics of one stats source: Collect takes one
// snapshot and emits every metric from it.
type statsCollector[S any] struct {
	stats   func() S
	metrics []metric[S]
}

func (c *statsCollector[S]) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.metrics {
		ch <- m.desc
	}
}

func (c *statsCollector[S]) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	for _, m := range c.metrics {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(s))
	}
}

// table builds the metrics of a collector: every name gets the prefix, every
// metric the constant labels.
type table[S any] struct {
	prefix string
	labels prometheus.Labels
	out    []metric[S]
}

func (t *table[S]) add(kind prometheus.ValueType, name, help string, value func(S) float64) {
	desc := prometheus.NewDesc(t.prefix+name, help, nil, t.labels)
	t.out = append(t.out, metric[S]{desc: desc, kind: kind, value: value})
}

func (t *table[S]) gauge(name, help string, value func(S) float64) {
	t.add(prometheus.GaugeValue, name, help, value)
}

func (t *table[S]) counter(name, help string, value func(S) float64) {
	t.add(prometheus.CounterValue, name, help, value)
}
