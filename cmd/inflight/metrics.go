package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/inflightmq/inflight/broker"
	inflightprom "github.com/inflightmq/inflight/metrics/prometheus"
)

// healthStore is the broker's Store with a memory of its failures: the
// broker turns a store error into an ERROR frame for one producer and
// carries on, so serve learns of it here. Reads and writes are tracked
// apart (a store may still answer State while Append fails): each is
// unhealthy from a failed call until a call of the same kind succeeds. A
// file.Store whose write or fsync failed refuses every later call, so it
// stays unhealthy until restarted; its error wraps broker.ErrStoreFailed,
// and the first such error is also sent on failed (buffered, one value), for
// serve to stop on. Safe for concurrent use.
//
// onChange, if set, is called when the store starts failing (with the
// error, starting true), when it recovers (nil), and, while it fails, when
// the kind of its error changes (starting false): a NATS store whose
// server just stopped may first time out ("JetStream not answering")
// before its connection sees the server gone ("NATS unreachable"), and
// its operator must learn the second. kind names an error's kind (nil:
// every error is of one kind). onChange runs on the broker's goroutine
// that made the call and must not block.
type healthStore struct {
	broker.Store
	appendErr  atomic.Pointer[error]
	lastSeqErr atomic.Pointer[error]
	failed     chan error // nil: nobody listens
	failOnce   sync.Once
	onChange   func(err error, starting bool)
	kind       func(error) string
	down       atomic.Bool            // what onChange was last told
	told       atomic.Pointer[string] // the kind of error onChange was last told
}

// record keeps err (nil: healthy) in p, with only a load on the healthy path.
func (h *healthStore) record(p *atomic.Pointer[error], err error) {
	if err == nil {
		if p.Load() != nil {
			p.Store(nil)
			h.noteChange()
		}
		return
	}
	p.Store(&err)
	if h.failed != nil && errors.Is(err, broker.ErrStoreFailed) {
		h.failOnce.Do(func() { h.failed <- err })
	}
	h.noteChange()
}

// noteChange tells onChange when the store's health changed.
func (h *healthStore) noteChange() {
	if h.onChange == nil {
		return
	}
	err := h.health()
	kind := ""
	if err != nil && h.kind != nil {
		kind = h.kind(err)
	}
	if h.down.CompareAndSwap(err == nil, err != nil) {
		h.told.Store(&kind)
		h.onChange(err, err != nil)
		return
	}
	if told := h.told.Load(); err != nil && told != nil && *told != kind && h.told.CompareAndSwap(told, &kind) {
		h.onChange(err, false)
	}
}

func (h *healthStore) State(topic, producer string) (broker.NameState, error) {
	st, err := h.Store.State(topic, producer)
	h.record(&h.lastSeqErr, err)
	return st, err
}

func (h *healthStore) Fence(producer string, epoch uint64) error {
	err := h.Store.Fence(producer, epoch)
	h.record(&h.appendErr, failure(err))
	return err
}

func (h *healthStore) Append(topic, producer string, epoch uint64, recs []broker.Record) error {
	err := h.Store.Append(topic, producer, epoch, recs)
	h.record(&h.appendErr, failure(err))
	return err
}

// healthFrames is a healthStore whose Store takes frames
// (broker.FrameAppender): embedding the Store interface hid its
// AppendFrames, and the broker would build Records for it.
type healthFrames struct{ *healthStore }

func (h healthFrames) AppendFrames(topic, producer string, epoch uint64, frames []broker.Frame) error {
	err := h.Store.(broker.FrameAppender).AppendFrames(topic, producer, epoch, frames)
	h.record(&h.appendErr, failure(err))
	return err
}

// forBroker returns h as the broker should see it: with AppendFrames when
// its Store has it.
func (h *healthStore) forBroker() broker.Store {
	if _, ok := h.Store.(broker.FrameAppender); ok {
		return healthFrames{h}
	}
	return h
}

// failure is a write's error as the store's health sees it: a write the
// store refused because a newer instance of the producer name fenced the
// writer is no failure of the store.
func failure(err error) error {
	if errors.Is(err, broker.ErrFenced) {
		return nil
	}
	return err
}

// health returns nil, or why the store is failing.
func (h *healthStore) health() error {
	for _, p := range []*atomic.Pointer[error]{&h.appendErr, &h.lastSeqErr} {
		if err := p.Load(); err != nil {
			return *err
		}
	}
	return nil
}

// metricsServer serves /metrics (Prometheus text format) and /healthz (200
// "ok", or 503 and the store's error) for `serve -metrics`.
type metricsServer struct {
	http *http.Server
	addr net.Addr
	done chan struct{}
}

// metricsHandler routes /metrics and /healthz; srv is the broker's
// server.Server.
func metricsHandler(b *broker.Broker, srv inflightprom.ServerSource, health func() error) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		inflightprom.NewBrokerCollector(b),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	if srv != nil { // nil: no server metrics (tests of the health check)
		reg.MustRegister(inflightprom.NewServerCollector(srv))
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := health(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "unhealthy: store: %v\n", err)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// startMetrics listens on addr and serves h until close.
func startMetrics(addr string, h http.Handler) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	m := &metricsServer{
		http: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second},
		addr: ln.Addr(),
		done: make(chan struct{}),
	}
	go func() {
		defer close(m.done)
		_ = m.http.Serve(ln) // returns ErrServerClosed after close
	}()
	return m, nil
}

// close stops the server: Shutdown until ctx ends, then Close.
func (m *metricsServer) close(ctx context.Context) error {
	err := m.http.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		err = m.http.Close()
	}
	<-m.done
	return err
}

// Pin and Unpin pass the broker's pins to the store when it forgets idle
// names (store/file's ForgetProducersAfter, broker.Pinner): without them,
// embedding the Store interface hid its Pinner, and serve
// -forget-producers-after could forget a name held by a live session.
func (h *healthStore) Pin(producer string) {
	if p, ok := h.Store.(broker.Pinner); ok {
		p.Pin(producer)
	}
}

func (h *healthStore) Unpin(producer string) {
	if p, ok := h.Store.(broker.Pinner); ok {
		p.Unpin(producer)
	}
}
