package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/server"
	"github.com/inflightmq/inflight/store/natsjs"
	"github.com/inflightmq/inflight/wire"
)

// serveFlags are serve's flags, parsed.
type serveFlags struct {
	listen, store, fsync, metrics, logFormat string
	fsyncEvery, statsEvery                   time.Duration
	repair, verify                           bool
	maxConns, maxPending, maxFrame           int
	maxBuffered                              int
	segmentBytes, retainBytes                int64
	retainAge, forgetAfter                   time.Duration
	idleTimeout, readTimeout, shutdown       time.Duration
	handshake                                time.Duration
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var f serveFlags
	fs.StringVar(&f.listen, "listen", "127.0.0.1:7070", "address to listen on (port 0: any free port)")
	fs.StringVar(&f.store, "store", "mem", "where records go: mem, file:PATH (append-only, replayed on start, locked), or\n"+
		"nats://HOST:PORT[,HOST:PORT...]/STREAM[?replicas=3&layout=packed|per-record&creds=FILE&tls_ca=FILE&...]\n"+
		"(a NATS JetStream stream: this broker becomes a stateless gateway; tls:// requires TLS)")
	fs.StringVar(&f.fsync, "fsync", "batch", "file store durability: batch (fsync before acking), interval, none")
	fs.DurationVar(&f.fsyncEvery, "fsync-every", 100*time.Millisecond, "fsync interval for -fsync interval")
	fs.BoolVar(&f.repair, "repair", false, "file store: if the active segment is corrupt, move the damaged remainder to PATH.corrupt-OFFSET and start")
	fs.BoolVar(&f.verify, "verify", false, "file store: read and check every segment before serving (sealed segments are not read at start otherwise)")
	fs.Int64Var(&f.segmentBytes, "segment-bytes", 128<<20, "file store: roll the active segment PATH to PATH.<n> at this size (a restart replays one segment)")
	fs.DurationVar(&f.retainAge, "retain-age", 0, "file store: remove sealed segments last written longer ago than this (0: keep)")
	fs.Int64Var(&f.retainBytes, "retain-bytes", 0, "file store: remove the oldest sealed segments while the store is larger than this (0: no limit)")
	fs.DurationVar(&f.forgetAfter, "forget-producers-after", 0, "file store: forget a producer name idle this long, its epoch and last sequence IDs (0: never;\nsee Forgotten producers in docs/stores.md)")
	fs.DurationVar(&f.statsEvery, "stats-every", 5*time.Second, "stats line interval (0: none)")
	fs.StringVar(&f.metrics, "metrics", "", "serve /metrics (Prometheus) and /healthz over HTTP on this address (empty: off)")
	fs.StringVar(&f.logFormat, "log-format", "text", "log lines as text (key=value) or json")
	fs.IntVar(&f.maxConns, "max-conns", server.DefaultMaxConns, "most open connections; a new one takes the place of the oldest without a HELLO,\nor is refused with an ERROR frame when all are past their HELLO")
	fs.IntVar(&f.maxPending, "max-pending-conns", server.DefaultMaxPendingConns, "most connections without a HELLO yet; a new one takes the place of the oldest")
	fs.IntVar(&f.maxFrame, "max-frame", wire.DefaultMaxFrameSize, "largest frame accepted, in bytes (producers are told in HELLO_OK)")
	fs.IntVar(&f.maxBuffered, "max-buffered", broker.DefaultMaxBufferedBytes, "most bytes of frames, decompressed and indexed, that all connections together hold\nbetween reading and storing them; a frame waits for room (at least -max-frame + 4 MiB)")
	fs.DurationVar(&f.handshake, "handshake-timeout", server.DefaultHandshakeTimeout, "close a connection that has not sent its HELLO (TLS handshake included) this long after connecting")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", time.Minute, "close a connection silent this long (producers PING every 2s by default)")
	fs.DurationVar(&f.readTimeout, "read-timeout", 10*time.Second, "close a connection whose frame stays incomplete this long")
	fs.DurationVar(&f.shutdown, "shutdown-timeout", 5*time.Second, "on SIGINT/SIGTERM, how long connections may take to close")
	var sec serverSecurity
	sec.register(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: inflight serve [flags]

Serves the inflight protocol over TCP until SIGINT or SIGTERM, then closes
gracefully. It logs with log/slog on stdout: what the store holds once it
opened, then a line that says where it listens (msg=listening addr=ADDR).
It exits 1 if it cannot start or the store fails for good (a full disk, an
I/O error), saying why in its log and on stderr. -store mem keeps records
in memory only: they are gone when serve exits. With -tls-cert and -tls-key it
serves TLS 1.3 (the standard library's transport; SIGHUP reloads the
certificate files); with -auth it refuses every producer its access list
does not grant, and a producer name held by a live producer of another
identity.

flags:
`)
		fs.PrintDefaults()
	}
	if code := parseFlags(fs, args, stdout, stderr); code >= 0 {
		return code
	}
	if code := checkServeFlags(fs, &f, stderr); code >= 0 {
		return code
	}
	if err := sec.check(); err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	log := newLogger(stdout, f.logFormat)
	// fatal reports why serve cannot go on: in its log, and on stderr,
	// which a terminal shows even when the log goes elsewhere.
	fatal := func(msg string, err error, args ...any) int {
		log.Error(msg, append(args, "err", err)...)
		fmt.Fprintf(stderr, "inflight serve: %s: %v\n", msg, err)
		return exitFailure
	}

	store, closeStore, err := openStore(ctx, &f, log)
	if errors.Is(err, natsjs.ErrInvalidConfig) {
		return usageError(fs, stderr, "-store: %v", err)
	}
	if err != nil {
		return fatal("cannot open the store", err, "store", redactStore(f.store))
	}
	defer closeStore()
	if f.store == "mem" {
		log.Warn("-store mem keeps records in this process's memory only: they are lost when it exits (-store file:PATH or nats://... keeps them)")
	}

	health := &healthStore{Store: store, failed: make(chan error, 1)}
	var downSince atomic.Int64 // unix ns
	health.kind = storeCauseKind
	health.onChange = func(err error, starting bool) {
		switch {
		case starting:
			downSince.Store(time.Now().UnixNano())
			log.Error("store failing; producers are told its error until it recovers", "cause", storeCause(err), "err", err)
			return
		case err != nil:
			log.Error("store still failing, for another cause", "cause", storeCause(err), "err", err,
				"down_for", time.Since(time.Unix(0, downSince.Load())).Round(time.Millisecond))
			return
		}
		log.Info("store recovered", "down_for", time.Since(time.Unix(0, downSince.Load())).Round(time.Millisecond))
	}
	bopts, err := sec.brokerOptions()
	if err != nil {
		return fatal("cannot load the access list", err, "auth", sec.auth)
	}
	// Refusals are logged like a producer's connection trouble: each new
	// one at once, repeats summarized, never blocking the session.
	refusals := startTrouble(func(line string) { log.Warn("refused", "what", line) }, troubleSummaryEvery)
	defer refusals.close()
	bopts = append(bopts, broker.MaxFrameSize(f.maxFrame), broker.OnRefused(func(r broker.Refusal) {
		refusals.observe(refusalError(r))
	}))
	if f.maxBuffered != broker.DefaultMaxBufferedBytes {
		bopts = append(bopts, broker.MaxBufferedBytes(f.maxBuffered))
	}
	b, err := broker.New(health.forBroker(), bopts...)
	if err != nil {
		return fatal("cannot start the broker", err)
	}
	srv, reload, err := startServer(&f, b, &sec, func(r server.Refusal) {
		// The client's host, not its port: repeats from one host are
		// summarized.
		host, _, err := net.SplitHostPort(r.Addr.String())
		if err != nil {
			host = r.Addr.String()
		}
		refusals.observe(fmt.Errorf("refused a connection from %s: %w", host, r.Err))
	})
	if err != nil {
		return fatal("cannot listen on "+f.listen, err, "addr", f.listen)
	}
	// SIGHUP is taken before the line that says serve is ready: a SIGHUP
	// sent once it is printed reloads, and never kills the process.
	hup := make(chan os.Signal, 1)
	if reload != nil {
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
	}
	log.Info("listening", "addr", srv.Addr().String())
	log.Info("security", "transport", sec.describe())
	if f.metrics != "" {
		m, err := startMetrics(f.metrics, metricsHandler(b, srv, health.health))
		if err != nil {
			_ = srv.Close(context.Background())
			return fatal("cannot serve metrics", err, "addr", f.metrics)
		}
		defer m.close(context.Background())
		log.Info("metrics", "metrics", "http://"+m.addr.String()+"/metrics", "health", "http://"+m.addr.String()+"/healthz")
	}

	var tick <-chan time.Time
	if f.statsEvery > 0 {
		t := time.NewTicker(f.statsEvery)
		defer t.Stop()
		tick = t.C
	}
	code := exitOK
	for code == exitOK {
		select {
		case <-tick:
			logStats(log, b.Stats(), srv.Stats())
		case <-hup:
			if err := reload(); err != nil {
				log.Error("SIGHUP: the certificate files could not be reloaded; the current certificate stays", "err", err)
			} else {
				log.Info("SIGHUP: certificate reloaded")
			}
		case err := <-health.failed:
			code = fatal("store failed for good; producers are told (ERROR store unavailable); shutting down", err)
		case <-ctx.Done():
			log.Info("shutting down")
			return shutdown(srv, closeStore, f.shutdown, fatal, exitOK)
		}
	}
	return shutdown(srv, closeStore, f.shutdown, fatal, code)
}

// storeCause says in words why the store fails: for a NATS store what the
// connection says ("NATS unreachable: nats: connection closed"), else the
// error itself.
func storeCause(err error) string {
	if c := natsjs.Cause(err); c != "" {
		return c
	}
	return err.Error()
}

// refusalError says what the broker refused. Since protocol version 4 a
// HELLO names no topic: the broker asks there whether the identity may
// write as the producer name on some topic, and each topic apart when the
// producer declares it (TOPIC).
func refusalError(r broker.Refusal) error {
	if r.Topic == "" {
		return fmt.Errorf("refused %v as producer %s (HELLO): %w", r.Identity, r.Producer, r.Err)
	}
	return fmt.Errorf("refused %v topic %s as producer %s (TOPIC): %w", r.Identity, r.Topic, r.Producer, r.Err)
}

// storeCauseKind is the kind of a store's error, as serve's log tells it
// apart: NATS unreachable, JetStream not answering, or another error.
func storeCauseKind(err error) string {
	switch {
	case errors.Is(err, natsjs.ErrUnreachable):
		return "unreachable"
	case errors.Is(err, natsjs.ErrNoAnswer):
		return "no answer"
	}
	return "other"
}

// logStats writes the stats line. refused counts every connection refused,
// or closed before its HELLO, and every HELLO refused; the fields after it
// split it by cause.
func logStats(log *slog.Logger, st broker.Stats, ss server.Stats) {
	log.Info("stats", "conns", ss.Conns, "pending", ss.Pending, "batches", st.Batches, "stored", st.Stored,
		"duplicates_skipped", st.Duplicates, "errors", ss.Errors, "timeouts", ss.Timeouts,
		"refused", uint64(ss.Refused+ss.RefusedPending+ss.HandshakeTimeouts+ss.HandshakeErrors+ss.NotTLS)+st.Unauthorized+st.TakeoversRefused,
		"too_many_conns", ss.Refused, "too_many_pending", ss.RefusedPending, "handshake_timeouts", ss.HandshakeTimeouts,
		"tls_handshake_errors", ss.HandshakeErrors, "not_tls", ss.NotTLS,
		"unauthorized", st.Unauthorized+st.TakeoversRefused,
		"buffered_bytes", st.BufferedBytes, "busy", st.Busy)
}

// shutdown closes the server (bounded by timeout) and the store, and
// returns code, or exitFailure (after fatal) if either failed.
func shutdown(srv *server.Server, closeStore func() error, timeout time.Duration, fatal func(string, error, ...any) int, code int) int {
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := srv.Close(sctx); err != nil {
		code = fatal("close", err)
	}
	if err := closeStore(); err != nil {
		code = fatal("close the store", err)
	}
	return code
}

// newLogger logs to w as text (key=value) or JSON.
func newLogger(w io.Writer, format string) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
}

// startServer starts the server, over TLS with -tls-cert. reload (nil
// without TLS) reloads the certificate files.
func startServer(f *serveFlags, b *broker.Broker, sec *serverSecurity, onRefused func(server.Refusal)) (*server.Server, func() error, error) {
	opts := []server.Option{server.MaxConns(f.maxConns), server.MaxPendingConns(f.maxPending),
		server.HandshakeTimeout(f.handshake), server.IdleTimeout(f.idleTimeout), server.ReadTimeout(f.readTimeout),
		server.OnRefused(onRefused)}
	var reload func() error
	if sec.tls() {
		tlsOpts, err := sec.serverOptions()
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, tlsOpts...)
	}
	srv, err := server.New(f.listen, b, opts...)
	if err != nil {
		return nil, nil, err
	}
	if sec.tls() {
		reload = func() error { return srv.ReloadCertificateFiles(sec.cert, sec.key) }
	}
	return srv, reload, nil
}

// describe says how producers connect and what they may do.
func (s *serverSecurity) describe() string {
	var d string
	switch {
	case s.clientCA != "":
		d = "TLS 1.3, client certificates required"
	case s.tls():
		d = "TLS 1.3"
	default:
		d = "plain TCP (no TLS: anyone on the network path can read and alter the traffic)"
	}
	if s.auth != "" {
		return d + "; access list " + s.auth + ": everything it does not grant is refused"
	}
	return d + "; no -auth: any producer may use any topic and name"
}
