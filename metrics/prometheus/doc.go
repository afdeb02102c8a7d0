// Package inflightprom exports inflight's counters as Prometheus metrics.
//
// It is a module of its own (github.com/inflightmq/inflight/metrics/prometheus)
// so that the Prometheus client library stays out of the core library's
// go.mod: only programs that import this package pay for it.
//
// Each collector reads its source's Stats once per scrape (a few atomic
// loads); nothing runs between scrapes. Every metric name starts with
// "inflight_". Register the collectors you need:
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(inflightprom.NewProducerCollector(p))
//	reg.MustRegister(inflightprom.NewBrokerCollector(b), inflightprom.NewServerCollector(srv))
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
package inflightprom
