package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/loopback"
	"github.com/inflightmq/inflight/metrics/hist"

	"github.com/inflightmq/inflight/bench/peers/internal/workload"
)

// producer is an inflight Producer (default options: no compression,
// natural batching, MaxPending 32768) against a broker with a counting
// store, over one transport.
type producer struct {
	*core.Producer
	close func()
}

func open(transportName string) (*producer, error) {
	env, err := loopback.Open(transportName)
	if err != nil {
		return nil, err
	}
	p, err := core.New(env.Dialer, core.Name("plot-"+transportName))
	if err != nil {
		env.Close()
		return nil, err
	}
	return &producer{Producer: p, close: func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.Close(ctx)
		env.Close()
	}}, nil
}

// point is one measurement of the throughput plot.
type point struct {
	size     int
	msgsPerS float64
	mbPerS   float64 // payload megabytes (10^6 B) per second
}

type series struct {
	name   string
	points []point
}

// throughput measures one producer over one transport at every size.
func throughput(transportName string, sizes []int, warm, dur time.Duration) (series, error) {
	p, err := open(transportName)
	if err != nil {
		return series{}, err
	}
	defer p.close()
	s := series{name: transportName}
	var failed atomic.Int64
	cb := func(_ core.MessageID, _ *core.Message, err error) {
		if err != nil {
			failed.Add(1)
		}
	}
	ctx := context.Background()
	for _, size := range sizes {
		msg := &core.Message{Payload: workload.Payload(size)}
		// Warm up for a while; the rate seen sizes the measured run.
		start := time.Now()
		warmN := 0
		for time.Since(start) < warm {
			for range 256 {
				if err := p.SendAsync(ctx, msg, cb); err != nil {
					return s, err
				}
			}
			warmN += 256
		}
		if err := p.Flush(ctx); err != nil {
			return s, err
		}
		n := max(int(float64(warmN)/time.Since(start).Seconds()*dur.Seconds()), 1000)

		start = time.Now()
		for range n {
			if err := p.SendAsync(ctx, msg, cb); err != nil {
				return s, err
			}
		}
		if err := p.Flush(ctx); err != nil {
			return s, err
		}
		elapsed := time.Since(start).Seconds()
		if f := failed.Load(); f != 0 {
			return s, fmt.Errorf("%d messages failed", f)
		}
		pt := point{size: size, msgsPerS: float64(n) / elapsed, mbPerS: float64(n*size) / elapsed / 1e6}
		fmt.Printf("throughput %s %6d B: %10.0f msgs/s %8.1f MB/s (%d messages in %.2fs)\n",
			transportName, size, pt.msgsPerS, pt.mbPerS, n, elapsed)
		s.points = append(s.points, pt)
	}
	return s, nil
}

// latencyRun is the outcome of the paced run.
type latencyRun struct {
	hist     hist.Histogram
	rate     int     // offered msgs/s
	achieved float64 // msgs/s actually sent
	size     int
	perWake  float64 // messages sent per wake-up of the pacer
}

// pacedLatency sends size-byte messages over TCP at rate msgs/s for d and
// records each one's time from just before SendAsync to its callback.
//
// The pacer sends every message that is due by the clock, then sleeps; a
// sleep lasts at least Go's timer granularity (about 1 ms on a small VM),
// so messages leave in small bursts, the count per wake-up is printed.
// Latency is measured from each message's actual send, not its scheduled
// one: the pacer is never held up by the producer at this rate, which is
// what would make that distinction matter.
func pacedLatency(rate, size int, d time.Duration) (*latencyRun, error) {
	p, err := open("tcp")
	if err != nil {
		return nil, err
	}
	defer p.close()
	ctx := context.Background()
	msg := &core.Message{Payload: workload.Payload(size)}

	// Warm up, and learn the ID that precedes the first measured message:
	// IDs of successes are consecutive, so message k has ID base+1+k.
	var base core.MessageID
	for range 1000 {
		id, err := p.Send(ctx, msg)
		if err != nil {
			return nil, err
		}
		base = id
	}

	total := int(float64(rate) * d.Seconds())
	interval := time.Second / time.Duration(rate)
	run := &latencyRun{rate: rate, size: size}
	sentAt := make([]int64, total) // ns since start
	var failed atomic.Int64
	var start time.Time
	cb := func(id core.MessageID, _ *core.Message, err error) {
		if err != nil {
			failed.Add(1)
			return
		}
		k := int(id - base - 1)
		run.hist.Record(time.Since(start) - time.Duration(atomic.LoadInt64(&sentAt[k])))
	}

	start = time.Now()
	wakes := 0
	for k := 0; k < total; {
		due := min(int(time.Since(start)/interval)+1, total)
		for ; k < due; k++ {
			atomic.StoreInt64(&sentAt[k], int64(time.Since(start)))
			if err := p.SendAsync(ctx, msg, cb); err != nil {
				return nil, err
			}
		}
		wakes++
		time.Sleep(interval)
	}
	run.achieved = float64(total) / time.Since(start).Seconds()
	run.perWake = float64(total) / float64(wakes)
	if err := p.Flush(ctx); err != nil {
		return nil, err
	}
	if f := failed.Load(); f != 0 {
		return nil, fmt.Errorf("%d messages failed", f)
	}
	return run, nil
}
