package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/hist"
	"github.com/inflightmq/inflight/transport/tcp"
)

func runProduce(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:7070", "broker address")
	n := fs.Int("n", 1_000_000, "messages to send")
	size := fs.Int("size", 100, "payload bytes per message (at least 16)")
	rateFlag := fs.Int("rate", 0, "messages per second (0: as fast as possible)")
	codec := fs.String("codec", "none", "batch compression: "+codecNames)
	timeout := fs.Duration("timeout", 10*time.Second, "SendTimeout of every message")
	name := fs.String("name", "", "producer name (default: random)")
	every := fs.Duration("progress", time.Second/2, "progress line interval")
	topic := fs.String("topic", core.DefaultTopic, "topic to write")
	var key keyFlag
	fs.Var(&key, "key", `record key: a fixed key, "random" (16 random bytes per message) or "" (none)`)
	var headers headerFlags
	fs.Var(&headers, "header", "header key=value on every message (repeatable)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: inflight produce [flags]

Sends -n messages to a broker (inflight serve) and reports throughput and the
send-to-callback latency distribution. Exit status 1 if a message failed.

flags:
`)
		fs.PrintDefaults()
	}
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	switch {
	case *n <= 0:
		return usageError(fs, stderr, "-n must be positive")
	case *size < 16 || *size > 1<<20:
		return usageError(fs, stderr, "-size must be in [16, 1048576]")
	case *rateFlag < 0:
		return usageError(fs, stderr, "-rate must not be negative")
	case *timeout <= 0 || *every <= 0:
		return usageError(fs, stderr, "-timeout and -progress must be positive")
	}
	codecOpt, err := codecOption(*codec)
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	d, err := tcp.NewDialer(*addr)
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	defer d.Close()
	opts := []core.Option{core.SendTimeout(*timeout), core.Topic(*topic)}
	if *name != "" {
		opts = append(opts, core.Name(*name))
	}
	if codecOpt != nil {
		opts = append(opts, codecOpt)
	}
	p, err := core.New(d, opts...)
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}

	// Each payload carries its message index and send time; callbacks run
	// on one goroutine, so the histogram needs no lock.
	start := time.Now()
	var h hist.Histogram
	var acked, failed atomic.Uint64
	var firstErr atomic.Pointer[error]
	done := make(chan struct{})
	total := uint64(*n)
	cb := func(_ core.MessageID, m *core.Message, err error) {
		sentAt := time.Duration(binary.BigEndian.Uint64(m.Payload[8:]))
		if err != nil {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, &err)
		} else {
			h.Record(time.Since(start) - sentAt)
			acked.Add(1)
		}
		if acked.Load()+failed.Load() == total {
			close(done)
		}
	}
	maxPending := core.DefaultMaxPending
	msgs := make([]core.Message, maxPending+1)
	for i := range msgs {
		msgs[i].Payload = make([]byte, *size)
		key.prepare(&msgs[i], headers)
	}
	prog := newProgress(stdout)
	show := func() {
		el := time.Since(start).Seconds()
		st := p.Stats()
		prog.show(fmt.Sprintf("%5.1fs  acked %s (%s)  failed %s  pending %s  reconnects %d",
			el, count(acked.Load()), rate(float64(acked.Load())/el), count(failed.Load()), count(st.Pending), st.Reconnects))
	}
	tick := time.NewTicker(*every)
	defer tick.Stop()
	var refused uint64
	for i := range total {
		if *rateFlag > 0 {
			if wait := time.Duration(float64(i)/float64(*rateFlag)*float64(time.Second)) - time.Since(start); wait > 0 {
				time.Sleep(wait)
			}
		}
		select {
		case <-tick.C:
			show()
		default:
		}
		m := &msgs[i%uint64(len(msgs))]
		binary.BigEndian.PutUint64(m.Payload, i)
		binary.BigEndian.PutUint64(m.Payload[8:], uint64(time.Since(start)))
		key.next(m)
		if err := p.SendAsync(ctx, m, cb); err != nil {
			refused++
			firstErr.CompareAndSwap(nil, &err)
			if failed.Add(1)+acked.Load() == total {
				close(done)
			}
			if ctx.Err() != nil {
				break
			}
		}
	}
	for wait := true; wait; {
		select {
		case <-done:
			wait = false
		case <-tick.C:
			show()
		case <-ctx.Done():
			wait = false
		}
	}
	elapsed := time.Since(start)
	show()
	prog.end()
	closeCtx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	_ = p.Close(closeCtx)

	a, f := acked.Load(), failed.Load()
	fmt.Fprintf(stdout, "\n%s acked, %s failed (%d refused at send) in %.2fs: %s, %.1f MB/s\n",
		count(a), count(f), refused, elapsed.Seconds(), rate(float64(a)/elapsed.Seconds()), float64(a)*float64(*size)/elapsed.Seconds()/1e6)
	fmt.Fprintf(stdout, "latency (send to callback): p50 %v  p90 %v  p99 %v  p999 %v  max %v\n",
		h.Quantile(0.5), h.Quantile(0.9), h.Quantile(0.99), h.Quantile(0.999), h.Max())
	if f > 0 {
		fmt.Fprintf(stdout, "first error: %v\n", *firstErr.Load())
		return exitFailure
	}
	if a < total {
		return exitFailure // interrupted
	}
	return exitOK
}
