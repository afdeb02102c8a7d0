package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/transport/mem"
	"github.com/inflightmq/inflight/transport/tcp"
)

// TestServeMetricsEndpoint: serve -metrics exposes the broker's and the
// server's counters under inflight_ in the Prometheus text format, and
// /healthz says ok.
func TestServeMetricsEndpoint(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	out := newWatchWriter()
	wait := runAsync(t, ctx, out, io.Discard, "serve", "-listen=127.0.0.1:0", "-metrics=127.0.0.1:0", "-stats-every=0")
	addr := out.wait(t, regexp.MustCompile(`msg=listening addr=(\S+)\n`), 10*time.Second)[1]
	metricsAddr := out.wait(t, regexp.MustCompile(`metrics=http://(\S+)/metrics`), 10*time.Second)[1]

	d, err := tcp.NewDialer(addr)
	require.NoError(t, err)
	defer d.Close()
	p, err := core.New(d, core.Name("scraped"))
	require.NoError(t, err)
	const n = 20
	for range n {
		_, err := p.Send(context.Background(), &core.Message{Payload: []byte("hello")})
		require.NoError(t, err)
	}
	require.NoError(t, p.Close(context.Background()))

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + metricsAddr + "/metrics")
	require.NoError(t, err)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	value := func(name string) float64 {
		f, ok := families[name]
		require.True(t, ok, "metric %s missing", name)
		m := f.GetMetric()[0]
		return m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	assert.Equal(t, float64(n), value("inflight_broker_stored_records_total"))
	assert.Equal(t, 1.0, value("inflight_server_connections_accepted_total"))
	assert.GreaterOrEqual(t, value("inflight_broker_batches_total"), 1.0)
	assert.Contains(t, families, "go_goroutines")
	for name := range families {
		if !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") {
			assert.True(t, strings.HasPrefix(name, "inflight_"), name)
		}
	}

	resp, err = client.Get("http://" + metricsAddr + "/healthz")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "ok\n", string(body))

	stop()
	assert.Equal(t, exitOK, wait())
}

// TestHealthzReportsStoreFailure: /healthz turns 503 with the store's error
// while the store fails, and ok again once it works.
func TestHealthzReportsStoreFailure(t *testing.T) {
	store := broker.NewMemoryStore()
	health := &healthStore{Store: store}
	b, err := broker.New(health)
	require.NoError(t, err)
	d := mem.NewDialer(b)
	defer d.Close()
	h := metricsHandler(b, nil, health.health)
	get := func() (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		return rec.Code, rec.Body.String()
	}
	code, _ := get()
	assert.Equal(t, http.StatusOK, code)

	diskFull := errors.New("disk full")
	store.FailAppends(diskFull)
	p, err := core.New(d, core.SendTimeout(10*time.Second), core.ReconnectBackoff(time.Millisecond, 20*time.Millisecond))
	require.NoError(t, err)
	outcome := make(chan error, 1)
	require.NoError(t, p.SendAsync(context.Background(), &core.Message{Payload: []byte("x")},
		func(_ core.MessageID, _ *core.Message, err error) { outcome <- err }))
	// The broker refuses the batch, the producer resends it, again and again.
	require.Eventually(t, func() bool { return health.health() != nil }, 10*time.Second, time.Millisecond)
	code, body := get()
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "disk full")

	store.FailAppends(nil) // the next resend is stored
	select {
	case err := <-outcome:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the message was not stored once the store recovered")
	}
	require.NoError(t, p.Close(context.Background()))
	code, _ = get()
	assert.Equal(t, http.StatusOK, code)
}
