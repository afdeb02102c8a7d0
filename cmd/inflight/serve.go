package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/transport/stdnet"
	"github.com/inflightmq/inflight/transport/tcp"
)

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:7070", "address to listen on (port 0: any free port)")
	storeFlag := fs.String("store", "mem", "where records go: mem, or file:PATH (append-only, replayed on start)")
	fsync := fs.String("fsync", "batch", "file store durability: batch (fsync before acking), interval, none")
	fsyncEvery := fs.Duration("fsync-every", 100*time.Millisecond, "fsync interval for -fsync interval")
	statsEvery := fs.Duration("stats-every", 5*time.Second, "stats line interval (0: none)")
	multicore := fs.Bool("multicore", false, "one event loop per CPU")
	metricsAddr := fs.String("metrics", "", "serve /metrics (Prometheus) and /healthz over HTTP on this address (empty: off)")
	var sec serverSecurity
	sec.register(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: inflight serve [flags]

Serves the inflight protocol over TCP until SIGINT or SIGTERM, then closes
gracefully. Its first line of output is "listening on ADDR". With -tls-cert
and -tls-key it serves TLS 1.3 (the standard library's transport; SIGHUP
reloads the certificate files); with -auth it refuses every producer its
access list does not grant, and a producer name held by a live producer of
another identity.

flags:
`)
		fs.PrintDefaults()
	}
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	if *statsEvery < 0 {
		return usageError(fs, stderr, "-stats-every must not be negative")
	}
	if err := checkHostPort(*listen); err != nil {
		return usageError(fs, stderr, "-listen: %v", err)
	}
	if *metricsAddr != "" {
		if err := checkHostPort(*metricsAddr); err != nil {
			return usageError(fs, stderr, "-metrics: %v", err)
		}
	}
	if err := sec.check(); err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	if *multicore && sec.tls() {
		return usageError(fs, stderr, "-multicore is for gnet's event loops, not TLS (which has a goroutine per connection)")
	}

	var store broker.Store
	var closeStore func() error
	switch {
	case *storeFlag == "mem":
		store, closeStore = broker.NewMemoryStore(), func() error { return nil }
	case strings.HasPrefix(*storeFlag, "file:") && len(*storeFlag) > len("file:"):
		policy, err := broker.ParseFsyncPolicy(*fsync)
		if err != nil {
			return usageError(fs, stderr, "%v", err)
		}
		if *fsyncEvery <= 0 {
			return usageError(fs, stderr, "-fsync-every must be positive")
		}
		fst, err := broker.OpenFileStore(strings.TrimPrefix(*storeFlag, "file:"), broker.Fsync(policy), broker.FsyncEvery(*fsyncEvery))
		if err != nil {
			fmt.Fprintf(stderr, "inflight serve: %v\n", err)
			return exitFailure
		}
		rec := fst.Recovery()
		fmt.Fprintf(stdout, "store %s: replayed %d entries (%d records), cut %d bytes of torn tail\n",
			*storeFlag, rec.Entries, rec.Records, rec.TruncatedBytes)
		store, closeStore = fst, fst.Close
	default:
		return usageError(fs, stderr, "-store must be mem or file:PATH, not %q", *storeFlag)
	}
	defer closeStore()

	health := &healthStore{Store: store}
	bopts, err := sec.brokerOptions()
	if err != nil {
		fmt.Fprintf(stderr, "inflight serve: %v\n", err)
		return exitFailure
	}
	// Refusals are printed like a producer's connection trouble: each new
	// one at once, repeats summarized, never blocking the session.
	refusals := startTrouble(func(line string) { fmt.Fprintln(stdout, line) }, troubleSummaryEvery)
	defer refusals.close()
	bopts = append(bopts, broker.OnRefused(func(r broker.Refusal) {
		refusals.observe(fmt.Errorf("refused %v, topic %s, producer %s: %w", r.Identity, r.Topic, r.Producer, r.Err))
	}))
	b, err := broker.New(health, bopts...)
	if err != nil {
		fmt.Fprintf(stderr, "inflight serve: %v\n", err)
		return exitFailure
	}
	srv, reload, err := startServer(*listen, b, &sec, *multicore)
	if err != nil {
		fmt.Fprintf(stderr, "inflight serve: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "listening on %s\n", srv.Addr())
	fmt.Fprintln(stdout, sec.describe())
	if *metricsAddr != "" {
		m, err := startMetrics(*metricsAddr, metricsHandler(b, srv, health.health))
		if err != nil {
			fmt.Fprintf(stderr, "inflight serve: %v\n", err)
			_ = srv.Close(context.Background())
			return exitFailure
		}
		defer m.close(context.Background())
		fmt.Fprintf(stdout, "metrics on http://%s/metrics, health on http://%s/healthz\n", m.addr, m.addr)
	}

	hup := make(chan os.Signal, 1)
	if reload != nil {
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
	}
	var tick <-chan time.Time
	if *statsEvery > 0 {
		t := time.NewTicker(*statsEvery)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-tick:
			st, ss := b.Stats(), srv.Stats()
			fmt.Fprintf(stdout, "conns %d  batches %s  stored %s  duplicates skipped %s  errors %d  timeouts %d  refused %d\n",
				ss.Conns, count(st.Batches), count(st.Stored), count(st.Duplicates), ss.Errors, ss.Timeouts,
				st.Unauthorized+st.TakeoversRefused)
		case <-hup:
			if err := reload(); err != nil {
				fmt.Fprintf(stderr, "inflight serve: SIGHUP: %v (the current certificate stays)\n", err)
			} else {
				fmt.Fprintln(stdout, "SIGHUP: certificate reloaded")
			}
		case <-ctx.Done():
			fmt.Fprintln(stdout, "shutting down")
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Close(sctx); err != nil {
				fmt.Fprintf(stderr, "inflight serve: close: %v\n", err)
				return exitFailure
			}
			if err := closeStore(); err != nil {
				fmt.Fprintf(stderr, "inflight serve: store: %v\n", err)
				return exitFailure
			}
			return exitOK
		}
	}
}

// startServer starts the server: stdnet over TLS with -tls-cert, else gnet's
// tcp. reload (nil without TLS) reloads the certificate files.
func startServer(addr string, b *broker.Broker, sec *serverSecurity, multicore bool) (server, func() error, error) {
	if !sec.tls() {
		srv, err := tcp.NewServer(addr, b, tcp.Multicore(multicore))
		return srv, nil, err
	}
	opts, err := sec.serverOptions()
	if err != nil {
		return nil, nil, err
	}
	srv, err := stdnet.NewServer(addr, b, opts...)
	if err != nil {
		return nil, nil, err
	}
	return stdnetServer{srv}, func() error { return srv.ReloadCertificateFiles(sec.cert, sec.key) }, nil
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
