package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/store/natsjs"
	"github.com/inflightmq/inflight/store/natsjs/natsjstest"
)

// natsEngine is the demo's -engine nats: a 3-server JetStream cluster on
// 127.0.0.1 in this process, an R3 stream, and the natsjs store the
// gateway (the demo's broker) writes through. Its stream leader is stopped
// mid-run and brought back.
type natsEngine struct {
	dir     string
	cluster *natsjstest.Cluster
	nc      *nats.Conn
	store   *natsjs.Store

	mu     sync.Mutex
	events []string // what the leader loop did, for the report
}

const demoStream = "INFLIGHT_DEMO"

func startNATSEngine(ctx context.Context) (*natsEngine, error) {
	dir, err := os.MkdirTemp("", "inflight-demo-nats")
	if err != nil {
		return nil, err
	}
	e := &natsEngine{dir: dir}
	if e.cluster, err = natsjstest.Start(dir, 3, natsjstest.Options{}); err != nil {
		e.close()
		return nil, err
	}
	if e.nc, err = natsjs.Connect(e.cluster.URLs()); err != nil {
		e.close()
		return nil, err
	}
	js, err := jetstream.New(e.nc)
	if err != nil {
		e.close()
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := natsjs.EnsureStream(sctx, js, natsjs.StreamConfig{Name: demoStream, Replicas: 3}); err != nil {
		e.close()
		return nil, err
	}
	// A publish timeout of a second: a write to a leader that just went
	// away fails soon and the producer resends through a new session.
	if e.store, err = natsjs.New(sctx, e.nc, natsjs.Config{Stream: demoStream, Timeout: time.Second}); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

func (e *natsEngine) note(format string, args ...any) {
	e.mu.Lock()
	e.events = append(e.events, fmt.Sprintf(format, args...))
	e.mu.Unlock()
}

// leaderLoop stops the stream leader a third into the run and restarts it
// at two thirds.
func (e *natsEngine) leaderLoop(ctx context.Context, d time.Duration, start time.Time) {
	select {
	case <-time.After(d / 3):
	case <-ctx.Done():
		return
	}
	l := e.cluster.StreamLeader(demoStream)
	if l < 0 {
		e.note("no stream leader to stop at %.1fs", time.Since(start).Seconds())
		return
	}
	e.cluster.Stop(l)
	e.note("stream leader n%d stopped at %.1fs", l, time.Since(start).Seconds())
	select {
	case <-time.After(d / 3):
	case <-ctx.Done():
	}
	if err := e.cluster.Restart(l); err != nil {
		e.note("restart of n%d failed: %v", l, err)
		return
	}
	e.note("n%d restarted at %.1fs", l, time.Since(start).Seconds())
}

// streamCheck is what the stream holds for the demo's producer: records,
// sequence IDs stored twice, records out of send order, records whose key
// or header is not what was sent (the topic is in the subject), and
// successes missing; err, if the stream could not be read back in full
// (then the counts are not a verdict).
type streamCheck struct {
	records, duplicates, disorder, badMeta, missing uint64
	err                                             error
}

// Reading the stream back ends within readBackLimit, and sooner when no
// record came for readBackStall: the demo always gets to its report.
const (
	readBackLimit = 2 * time.Minute
	readBackStall = 30 * time.Second
)

// check reads the stream back and checks every record, showing on prog,
// every interval, how many it read (of at least acked: every success is in
// the stream).
func (e *natsEngine) check(ctx context.Context, successes []bitset, acked uint64, prog *progress, every time.Duration) streamCheck {
	var c streamCheck
	js, err := jetstream.New(e.nc)
	if err != nil {
		c.err = err
		return c
	}
	rctx, cancel := context.WithTimeoutCause(ctx, readBackLimit, fmt.Errorf("not read back within %v", readBackLimit))
	defer cancel()
	rctx, stalled := context.WithCancelCause(rctx)
	defer stalled(nil)

	var read atomic.Uint64 // records, for the progress line
	start := time.Now()
	show := func() {
		n := read.Load()
		el := time.Since(start).Seconds()
		prog.show(fmt.Sprintf("%5.1fs  reading the stream back: %s records (%s), at least %s expected",
			el, count(n), rate(float64(n)/el), count(acked)))
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		last, lastAt := uint64(0), time.Now()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if n := read.Load(); n != last {
				last, lastAt = n, time.Now()
			} else if time.Since(lastAt) >= readBackStall {
				stalled(fmt.Errorf("no record came for %v", readBackStall))
			}
			show()
		}
	})

	// Each topic is its own subject, read in turn: sequence IDs, order and
	// dedup are per topic.
	stored := make([]bitset, len(demoTopics))
	for k, topic := range demoTopics {
		var lastIdx uint64
		err = natsjs.Read(rctx, js, demoStream, e.store.Subject(topic, "demo"), func(_ string, _ uint64, r broker.Record) error {
			read.Add(1)
			c.records++
			if stored[k].set(r.Seq) {
				c.duplicates++
			}
			if len(r.Payload) < 8 {
				c.badMeta++
				return nil
			}
			idx := binary.BigEndian.Uint64(r.Payload)
			if idx+1 <= lastIdx {
				c.disorder++
			}
			lastIdx = idx + 1
			if demoTopicOf(idx) != k || !demoMetaMatches(idx, r) {
				c.badMeta++
			}
			return nil
		})
		if err != nil {
			err = fmt.Errorf("topic %s: %w", topic, err)
			break
		}
	}
	close(done)
	wg.Wait()
	show()
	prog.end()
	if err != nil {
		if cause := context.Cause(rctx); rctx.Err() != nil && cause != nil {
			err = fmt.Errorf("%w (%w)", cause, err)
		}
		c.err = err
		return c
	}
	for k := range demoTopics {
		successes[k].each(func(seq uint64) {
			if !stored[k].has(seq) {
				c.missing++
			}
		})
	}
	return c
}

func (e *natsEngine) printEvents(w io.Writer) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ev := range e.events {
		fmt.Fprintf(w, "  %s\n", ev)
	}
}

func (e *natsEngine) close() {
	if e.store != nil {
		e.store.Close() // its own connection for writes
	}
	if e.nc != nil {
		e.nc.Close()
	}
	if e.cluster != nil {
		e.cluster.Shutdown()
	}
	_ = os.RemoveAll(e.dir)
}
