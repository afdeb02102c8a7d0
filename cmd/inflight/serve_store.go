package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/store/file"
)

// storeHook, when set (by tests), wraps the store serve opened.
var storeHook func(broker.Store) broker.Store

// checkServeFlags refuses values that make no sense and flags that do not
// apply to the chosen store (set on the command line, not ignored). It
// returns the exit code to stop with, or -1.
func checkServeFlags(fs *flag.FlagSet, f *serveFlags, stderr io.Writer) int {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	switch {
	case f.statsEvery < 0:
		return usageError(fs, stderr, "-stats-every must not be negative")
	case f.logFormat != "text" && f.logFormat != "json":
		return usageError(fs, stderr, "-log-format must be text or json, not %q", f.logFormat)
	case f.maxConns <= 0 || f.maxPending <= 0:
		return usageError(fs, stderr, "-max-conns and -max-pending-conns must be positive")
	case f.idleTimeout <= 0 || f.readTimeout <= 0 || f.handshake <= 0 || f.shutdown <= 0:
		return usageError(fs, stderr, "-idle-timeout, -read-timeout, -handshake-timeout and -shutdown-timeout must be positive")
	}
	if _, err := broker.New(broker.NewMemoryStore(), broker.MaxFrameSize(f.maxFrame)); err != nil {
		return usageError(fs, stderr, "-max-frame: %v", err)
	}
	if set["max-buffered"] {
		if _, err := broker.New(broker.NewMemoryStore(), broker.MaxFrameSize(f.maxFrame), broker.MaxBufferedBytes(f.maxBuffered)); err != nil {
			return usageError(fs, stderr, "-max-buffered: %v", err)
		}
	}
	if err := checkHostPort(f.listen); err != nil {
		return usageError(fs, stderr, "-listen: %v", err)
	}
	if f.metrics != "" {
		if err := checkHostPort(f.metrics); err != nil {
			return usageError(fs, stderr, "-metrics: %v", err)
		}
	}
	switch {
	case f.store == "mem" || isNATSStore(f.store):
		for _, name := range []string{"fsync", "fsync-every", "repair", "verify", "segment-bytes", "retain-age", "retain-bytes", "forget-producers-after"} {
			if set[name] {
				return usageError(fs, stderr, "-%s applies to -store file:PATH only, not to -store %s", name, redactStore(f.store))
			}
		}
	case strings.HasPrefix(f.store, "file:") && len(f.store) > len("file:"):
		opts, err := fileStoreOptions(f)
		if err != nil {
			return usageError(fs, stderr, "%v", err)
		}
		if f.fsyncEvery <= 0 {
			return usageError(fs, stderr, "-fsync-every must be positive")
		}
		if set["fsync-every"] && f.fsync != "interval" {
			return usageError(fs, stderr, "-fsync-every applies to -fsync interval only, not to -fsync %s", f.fsync)
		}
		if err := file.CheckOptions(opts...); err != nil {
			return usageError(fs, stderr, "%v", err)
		}
	default:
		return usageError(fs, stderr, "-store must be mem, file:PATH or nats://HOST:PORT/STREAM, not %q", f.store)
	}
	return -1
}

// openStore opens the store the flags name and logs what a file store's
// replay found. A corrupt file is refused with a hint at -repair.
func openStore(ctx context.Context, f *serveFlags, log *slog.Logger) (broker.Store, func() error, error) {
	var store broker.Store
	closeStore := func() error { return nil }
	switch {
	case f.store == "mem":
		store = broker.NewMemoryStore()
	case isNATSStore(f.store):
		st, closeFn, err := openNATSStore(ctx, f.store)
		if err != nil {
			return nil, nil, err
		}
		log.Info("store opened", "store", redactStore(f.store))
		store, closeStore = st, closeFn
	default:
		opts, _ := fileStoreOptions(f) // checked by checkServeFlags
		fst, err := file.Open(strings.TrimPrefix(f.store, "file:"), opts...)
		var ce *file.CorruptError
		if errors.As(err, &ce) {
			log.Error("the store file is corrupt and was left untouched; to start, move the damaged part aside with -repair",
				"path", ce.Path, "offset", ce.Offset, "bytes_after", ce.Bytes, "why", ce.Why)
		}
		if err != nil {
			return nil, nil, err
		}
		rec := fst.Recovery()
		log.Info("store opened", "store", f.store, "fsync", f.fsync, "entries", rec.Entries, "records", rec.Records,
			"sealed_segments", rec.Sealed, "removed_by_retention", rec.Removed, "producers_forgotten", rec.Forgotten, "torn_tail_cut_bytes", rec.TruncatedBytes)
		if rec.UpgradedFrom != 0 {
			log.Info("store format upgraded", "from", rec.UpgradedFrom)
		}
		if rec.SideFile != "" {
			log.Warn("store repaired: the damaged remainder was moved aside; producers whose records were in it will see a lower last sequence ID",
				"moved_bytes", rec.RepairedBytes, "side_file", rec.SideFile)
		}
		if f.verify {
			start := time.Now()
			if err := fst.Verify(); err != nil {
				if errors.As(err, &ce) {
					log.Error("a store segment is corrupt; the records before the damage read back with inflight read, the rest is left as it is",
						"path", ce.Path, "offset", ce.Offset, "bytes_after", ce.Bytes, "why", ce.Why)
				}
				_ = fst.Close()
				return nil, nil, err
			}
			log.Info("store verified", "segments", len(fst.Segments()), "took", time.Since(start).Round(time.Millisecond))
		}
		store, closeStore = fst, fst.Close
	}
	if storeHook != nil {
		store = storeHook(store)
	}
	return store, closeStore, nil
}

// fileStoreOptions returns the file store options the flags name (an
// -fsync that names no policy is an error): checkServeFlags checks them,
// openStore opens the store with them.
func fileStoreOptions(f *serveFlags) ([]file.Option, error) {
	policy, err := file.ParseFsyncPolicy(f.fsync)
	if err != nil {
		return nil, err
	}
	opts := []file.Option{file.Fsync(policy), file.FsyncEvery(f.fsyncEvery),
		file.SegmentBytes(f.segmentBytes), file.RetainAge(f.retainAge), file.RetainBytes(f.retainBytes),
		file.ForgetProducersAfter(f.forgetAfter)}
	if f.repair {
		opts = append(opts, file.Repair())
	}
	return opts, nil
}

// redactStore is a -store value fit for a log line or a message: the query
// of a nats:// URL (which may name a credentials file) is left out.
func redactStore(s string) string {
	if i := strings.IndexByte(s, '?'); i >= 0 && isNATSStore(s) {
		return s[:i] + "?..."
	}
	return s
}
