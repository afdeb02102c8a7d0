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
	var sec clientSecurity
	sec.register(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: inflight produce [flags]

Sends -n messages to a broker (inflight serve) and reports throughput and the
send-to-callback latency distribution. Exit status 1 if a message failed.
Over TLS with -tls or any -tls-* flag. A token to present is read from
-token-file or $INFLIGHT_TOKEN, never from the command line.

flags:
`)
		fs.PrintDefaults()
	}
	if code := parseFlags(fs, args, stdout, stderr); code >= 0 {
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
	if err := checkHostPort(*addr); err != nil {
		return usageError(fs, stderr, "-addr: %v", err)
	}
	codecOpt, err := codecOption(*codec)
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	if err := sec.check(); err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	tokenOpt, err := sec.token()
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	if tokenOpt != nil && !sec.tls {
		fmt.Fprintln(stderr, "inflight produce: warning: sending the token without TLS: anyone on the network path can read it")
	}
	d, closeDialer, err := sec.dialer(*addr)
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	defer closeDialer()
	prog := newProgress(stdout)
	connTrouble := startTrouble(prog.note, troubleSummaryEvery)
	defer connTrouble.close()
	// A broker answers HELLO in milliseconds; waiting the default 5s would
	// hide for that long that -addr is, say, an HTTP server.
	opts := []core.Option{core.SendTimeout(*timeout), core.Topic(*topic), core.ErrorHandler(connTrouble.observe),
		core.HandshakeTimeout(handshakeTimeout)}
	if *name != "" {
		opts = append(opts, core.Name(*name))
	}
	if codecOpt != nil {
		opts = append(opts, codecOpt)
	}
	if tokenOpt != nil {
		opts = append(opts, tokenOpt)
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
	show := func() {
		el := time.Since(start).Seconds()
		st := p.Stats()
		prog.show(fmt.Sprintf("%5.1fs  acked %s (%s)  failed %s  pending %s  reconnects %d",
			el, count(acked.Load()), rate(float64(acked.Load())/el), count(failed.Load()), count(st.Pending), st.Reconnects))
	}
	tick := time.NewTicker(*every)
	defer tick.Stop()
	var refused uint64
	// Messages are reused round robin over the accepted ones: a refused
	// message is not held by the producer, an accepted one until its callback.
	slot := 0
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
		m := &msgs[slot]
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
			continue
		}
		slot = (slot + 1) % len(msgs)
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
	connTrouble.close()

	a, f := acked.Load(), failed.Load()
	fmt.Fprintf(stdout, "\n%s acked, %s failed (%d refused at send) in %.2fs: %s, %s\n",
		count(a), count(f), refused, elapsed.Seconds(), rate(float64(a)/elapsed.Seconds()), bytesRate(float64(a)*float64(*size)/elapsed.Seconds()))
	printLatency(stdout, &h)
	if f > 0 {
		fmt.Fprintf(stdout, "first error: %v\n", *firstErr.Load())
		return exitFailure
	}
	if a < total {
		return exitFailure // interrupted
	}
	return exitOK
}
