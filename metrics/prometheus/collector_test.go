package inflightprom_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/leakcheck"
	inflightprom "github.com/inflightmq/inflight/metrics/prometheus"
	"github.com/inflightmq/inflight/server"
	"github.com/inflightmq/inflight/transport/mem"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leakcheck.Options()...) }

type fakeProducer core.Stats

func (fakeProducer) Name() string        { return "p1" }
func (f fakeProducer) Stats() core.Stats { return core.Stats(f) }

type fakeBroker broker.Stats

func (f fakeBroker) Stats() broker.Stats { return broker.Stats(f) }

type fakeServer server.Stats

func (f fakeServer) Stats() server.Stats { return server.Stats(f) }

// TestCollectorsExportEveryField: each Stats field appears under its name,
// with its value, and the metrics pass the Prometheus naming lint.
func TestCollectorsExportEveryField(t *testing.T) {
	for _, tc := range []struct {
		c    prometheus.Collector
		want string
	}{
		{inflightprom.NewProducerCollector(fakeProducer{Pending: 3, Acked: 7, BytesWire: 100}), `
			inflight_producer_pending_messages{producer="p1"} 3
			inflight_producer_acked_messages_total{producer="p1"} 7
			inflight_producer_batch_wire_bytes_total{producer="p1"} 100
			inflight_producer_reconnects_total{producer="p1"} 0`},
		{inflightprom.NewBrokerCollector(fakeBroker{Sessions: 2, Stored: 9, Duplicates: 1, Unauthorized: 3, TakeoversRefused: 4, Fenced: 5, NameInUse: 6}), `
			inflight_broker_sessions 2
			inflight_broker_fenced_total 5
			inflight_broker_name_in_use_total 6
			inflight_broker_stored_records_total 9
			inflight_broker_duplicate_records_total 1
			inflight_broker_unauthorized_total 3
			inflight_broker_takeovers_refused_total 4`},
		{inflightprom.NewBrokerCollector(fakeBroker{BufferedBytes: 5, BufferWaits: 6, Busy: 7}), `
			inflight_broker_buffered_bytes 5
			inflight_broker_buffer_waits_total 6
			inflight_broker_busy_total 7`},
		{inflightprom.NewServerCollector(fakeServer{Conns: 4, Refused: 5, HandshakeErrors: 6, Pending: 1,
			RefusedPending: 2, HandshakeTimeouts: 3, NotTLS: 7}), `
			inflight_server_connections 4
			inflight_server_connections_refused_total 5
			inflight_server_tls_handshake_errors_total 6
			inflight_server_pending_connections 1
			inflight_server_pending_refused_total 2
			inflight_server_handshake_timeouts_total 3
			inflight_server_not_tls_total 7`},
	} {
		problems, err := testutil.CollectAndLint(tc.c)
		require.NoError(t, err)
		assert.Empty(t, problems)
		got := gather(t, tc.c)
		for _, line := range strings.Split(strings.TrimSpace(tc.want), "\n") {
			assert.Contains(t, got, strings.TrimSpace(line)+"\n")
		}
	}
	assert.Equal(t, 12, testutil.CollectAndCount(inflightprom.NewProducerCollector(fakeProducer{})))
	assert.Equal(t, 13, testutil.CollectAndCount(inflightprom.NewBrokerCollector(fakeBroker{})))
	assert.Equal(t, 11, testutil.CollectAndCount(inflightprom.NewServerCollector(fakeServer{})))
}

// TestCollectorsReadLiveCounters: a real producer and broker, scraped after
// messages were stored.
func TestCollectorsReadLiveCounters(t *testing.T) {
	b, err := broker.New(broker.NewMemoryStore())
	require.NoError(t, err)
	d := mem.NewDialer(b)
	defer d.Close()
	p, err := core.New(d, core.Name("live"))
	require.NoError(t, err)
	for range 5 {
		_, err := p.Send(context.Background(), &core.Message{Payload: []byte("x")})
		require.NoError(t, err)
	}
	require.NoError(t, p.Close(context.Background()))

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(inflightprom.NewProducerCollector(p), inflightprom.NewBrokerCollector(b))
	got, err := reg.Gather()
	require.NoError(t, err)
	values := map[string]float64{}
	for _, mf := range got {
		values[mf.GetName()] = mf.GetMetric()[0].GetCounter().GetValue() + mf.GetMetric()[0].GetGauge().GetValue()
	}
	assert.Equal(t, 5.0, values["inflight_producer_acked_messages_total"])
	assert.Equal(t, 5.0, values["inflight_broker_stored_records_total"])
	assert.Equal(t, 0.0, values["inflight_producer_pending_messages"])
}

func gather(t *testing.T, c prometheus.Collector) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	var sb strings.Builder
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			sb.WriteString(mf.GetName())
			if lp := m.GetLabel(); len(lp) > 0 {
				sb.WriteString("{")
				for i, l := range lp {
					if i > 0 {
						sb.WriteString(",")
					}
					sb.WriteString(l.GetName() + `="` + l.GetValue() + `"`)
				}
				sb.WriteString("}")
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			sb.WriteString(" " + strconv.FormatFloat(v, 'g', -1, 64) + "\n")
		}
	}
	return sb.String()
}
