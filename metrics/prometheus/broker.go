package inflightprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/server"
)

// BrokerSource is what NewBrokerCollector reads; *broker.Broker is one.
type BrokerSource interface{ Stats() broker.Stats }

// NewBrokerCollector returns a collector of b's Stats. Safe for concurrent
// scrapes.
func NewBrokerCollector(b BrokerSource) prometheus.Collector {
	t := table[broker.Stats]{prefix: "inflight_broker_"}
	t.gauge("sessions", "Live producer sessions.",
		func(s broker.Stats) float64 { return float64(s.Sessions) })
	t.counter("batches_total", "BATCH frames stored (or found duplicate) and acknowledged.",
		func(s broker.Stats) float64 { return float64(s.Batches) })
	t.counter("stored_records_total", "Records appended to the store.",
		func(s broker.Stats) float64 { return float64(s.Stored) })
	t.counter("duplicate_records_total", "Records skipped because they were already stored.",
		func(s broker.Stats) float64 { return float64(s.Duplicates) })
	t.counter("session_errors_total", "Sessions failed for a protocol violation or a store error.",
		func(s broker.Stats) float64 { return float64(s.ProtocolErrors) })
	t.counter("takeovers_total", "Sessions closed because a newer one took their producer name.",
		func(s broker.Stats) float64 { return float64(s.Takeovers) })
	t.counter("unauthorized_total", "HELLOs refused: credentials not accepted, or a topic or producer name not granted.",
		func(s broker.Stats) float64 { return float64(s.Unauthorized) })
	t.counter("takeovers_refused_total", "HELLOs refused because a live session of another identity holds the producer name.",
		func(s broker.Stats) float64 { return float64(s.TakeoversRefused) })
	t.counter("fenced_total", "HELLOs refused and sessions ended because a newer instance of their producer name holds it.",
		func(s broker.Stats) float64 { return float64(s.Fenced) })
	t.counter("name_in_use_total", "HELLOs that would not take a producer name from a live session, refused.",
		func(s broker.Stats) float64 { return float64(s.NameInUse) })
	t.gauge("buffered_bytes", "Frame memory that sessions hold now, of the MaxBufferedBytes budget.",
		func(s broker.Stats) float64 { return float64(s.BufferedBytes) })
	t.counter("buffer_waits_total", "BATCH frames that waited for the frame memory budget.",
		func(s broker.Stats) float64 { return float64(s.BufferWaits) })
	t.counter("busy_total", "BATCH frames refused after waiting too long for the frame memory budget.",
		func(s broker.Stats) float64 { return float64(s.Busy) })
	return &statsCollector[broker.Stats]{stats: b.Stats, metrics: t.out}
}

// ServerSource is what NewServerCollector reads; *server.Server is one.
type ServerSource interface{ Stats() server.Stats }

// NewServerCollector returns a collector of a server.Server's Stats. Safe for
// concurrent scrapes.
func NewServerCollector(srv ServerSource) prometheus.Collector {
	t := table[server.Stats]{prefix: "inflight_server_"}
	t.gauge("connections", "Open connections, pending ones included.",
		func(s server.Stats) float64 { return float64(s.Conns) })
	t.gauge("pending_connections", "Open connections that have not sent their HELLO yet.",
		func(s server.Stats) float64 { return float64(s.Pending) })
	t.counter("connections_accepted_total", "Connections accepted.",
		func(s server.Stats) float64 { return float64(s.Accepted) })
	t.counter("connections_refused_total", "Connections refused by MaxConns, every open one being past its HELLO.",
		func(s server.Stats) float64 { return float64(s.Refused) })
	t.counter("pending_refused_total", "Connections without a HELLO closed to make room for a newer one (MaxPendingConns, MaxConns).",
		func(s server.Stats) float64 { return float64(s.RefusedPending) })
	t.counter("handshake_timeouts_total", "Connections closed for not sending their HELLO, TLS handshake included, within HandshakeTimeout.",
		func(s server.Stats) float64 { return float64(s.HandshakeTimeouts) })
	t.counter("connection_timeouts_total", "Connections closed by ReadTimeout or IdleTimeout.",
		func(s server.Stats) float64 { return float64(s.Timeouts) })
	t.counter("connection_errors_total", "Connections closed for a protocol or store error.",
		func(s server.Stats) float64 { return float64(s.Errors) })
	t.counter("tls_handshake_errors_total", "TLS handshakes that failed for a TLS reason (a missing, expired or unknown certificate, an alert).",
		func(s server.Stats) float64 { return float64(s.HandshakeErrors) })
	t.counter("not_tls_total", "Connections to a TLS server that did not speak TLS.",
		func(s server.Stats) float64 { return float64(s.NotTLS) })
	t.gauge("max_buffered_bytes", "Most bytes one connection left buffered (an incomplete frame).",
		func(s server.Stats) float64 { return float64(s.MaxBuffered) })
	return &statsCollector[server.Stats]{stats: srv.Stats, metrics: t.out}
}
