package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/store/natsjs"
	"github.com/inflightmq/inflight/transport/tcp"
)

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:7070", "address to listen on (port 0: any free port)")
	storeFlag := fs.String("store", "mem", "where records go: mem, file:PATH (append-only, replayed on start), or\n"+
		"nats://HOST:PORT[,HOST:PORT...]/STREAM[?replicas=3&layout=packed|per-record&creds=FILE&tls_ca=FILE&...]\n"+
		"(a NATS JetStream stream: this broker becomes a stateless gateway; tls:// requires TLS)")
	fsync := fs.String("fsync", "batch", "file store durability: batch (fsync before acking), interval, none")
	fsyncEvery := fs.Duration("fsync-every", 100*time.Millisecond, "fsync interval for -fsync interval")
	statsEvery := fs.Duration("stats-every", 5*time.Second, "stats line interval (0: none)")
	multicore := fs.Bool("multicore", false, "one event loop per CPU")
	metricsAddr := fs.String("metrics", "", "serve /metrics (Prometheus) and /healthz over HTTP on this address (empty: off)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: inflight serve [flags]

Serves the inflight protocol over TCP until SIGINT or SIGTERM, then closes
gracefully. Its first line of output is "listening on ADDR".

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
	case isNATSStore(*storeFlag):
		st, closeFn, err := openNATSStore(ctx, *storeFlag)
		if errors.Is(err, natsjs.ErrInvalidConfig) {
			return usageError(fs, stderr, "-store: %v", err)
		}
		if err != nil {
			fmt.Fprintf(stderr, "inflight serve: %v\n", err)
			return exitFailure
		}
		store, closeStore = st, closeFn
	default:
		return usageError(fs, stderr, "-store must be mem, file:PATH or nats://HOST:PORT/STREAM, not %q", *storeFlag)
	}
	defer closeStore()

	health := &healthStore{Store: store}
	b, err := broker.New(health)
	if err != nil {
		fmt.Fprintf(stderr, "inflight serve: %v\n", err)
		return exitFailure
	}
	srv, err := tcp.NewServer(*listen, b, tcp.Multicore(*multicore))
	if err != nil {
		fmt.Fprintf(stderr, "inflight serve: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "listening on %s\n", srv.Addr())
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
			fmt.Fprintf(stdout, "conns %d  batches %s  stored %s  duplicates skipped %s  errors %d  timeouts %d\n",
				ss.Conns, count(st.Batches), count(st.Stored), count(st.Duplicates), ss.Errors, ss.Timeouts)
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
