package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/metrics/hist"
	"github.com/inflightmq/inflight/server"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/transport/tcp"
)

type demoConfig struct {
	duration   time.Duration
	size       int
	codec      string
	killEvery  time.Duration
	downFor    time.Duration
	timeout    time.Duration
	maxPending int
	report     time.Duration
	engine     string // mem, or nats (see natsEngine)
	tls        bool
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cfg demoConfig
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "how long to send")
	fs.IntVar(&cfg.size, "size", 100, "payload bytes per message (at least 8)")
	fs.StringVar(&cfg.codec, "codec", "none", "batch compression: "+codecNames)
	fs.DurationVar(&cfg.killEvery, "kill-every", 2*time.Second, "stop the broker this often (0: never)")
	fs.DurationVar(&cfg.downFor, "down-for", 300*time.Millisecond, "how long the broker stays down each time")
	fs.DurationVar(&cfg.timeout, "timeout", time.Second, "SendTimeout of every message")
	fs.IntVar(&cfg.maxPending, "max-pending", core.DefaultMaxPending, "MaxPending of the producer")
	fs.DurationVar(&cfg.report, "progress", time.Second/4, "progress line interval")
	fs.StringVar(&cfg.engine, "engine", "mem", "the broker's store: mem (in memory), or nats (a 3-server NATS JetStream cluster on 127.0.0.1,\n"+
		"an R3 stream whose leader is stopped a third into the run and restarted at two thirds)")
	fs.BoolVar(&cfg.tls, "tls", false, "mutual TLS 1.3 and an access list: the producer proves itself with a client certificate, an intruder with another one is refused the producer's name")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: inflight demo [flags]

Starts a broker on 127.0.0.1 (random port) and a producer over TCP that
writes three topics round robin on one connection, sends as fast as it can
while the broker is stopped and restarted on the same address (same store),
and then checks every guarantee, per topic: each accepted message got
exactly one callback, successes came in send order within their topic, the
broker stored no sequence ID of a topic twice, every success is stored, and
every stored record has the topic, key and header it was sent with. Exit status 1 if one failed. With
-tls, over mutual TLS with certificates made for the run, in memory.

flags:
`)
		fs.PrintDefaults()
	}
	if code := parseFlags(fs, args, stdout, stderr); code >= 0 {
		return code
	}
	switch {
	case cfg.duration <= 0:
		return usageError(fs, stderr, "-duration must be positive")
	case cfg.size < 8 || cfg.size > 1<<20:
		return usageError(fs, stderr, "-size must be in [8, 1048576]")
	case cfg.killEvery < 0 || cfg.downFor < 0:
		return usageError(fs, stderr, "-kill-every and -down-for must not be negative")
	case cfg.timeout <= 0 || cfg.maxPending <= 0 || cfg.report <= 0:
		return usageError(fs, stderr, "-timeout, -max-pending and -progress must be positive")
	case cfg.engine != "mem" && cfg.engine != "nats":
		return usageError(fs, stderr, "-engine must be mem or nats, not %q", cfg.engine)
	}
	codecOpt, err := codecOption(cfg.codec)
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	res, err := demo(ctx, cfg, codecOpt, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "inflight demo: %v\n", err)
		return exitFailure
	}
	if !res.print(stdout, cfg) {
		return exitFailure
	}
	fmt.Fprintln(stdout)
	printLatency(stdout, &res.latency)
	return exitOK
}

// demoResult is what the demo measured and checked.
type demoResult struct {
	elapsed    time.Duration
	kills      int
	sent       uint64 // SendAsync calls
	refused    uint64 // SendAsync returned an error (no callback due)
	acked      uint64
	timedOut   uint64
	failed     uint64 // other callback errors (ErrClosed at the end)
	missingCB  uint64 // accepted messages whose callback never ran
	doubleCB   uint64 // callbacks that ran twice
	outOfOrder uint64 // successes reported out of send order within their topic
	stored     uint64
	duplicates uint64 // sequence IDs stored twice
	disorder   uint64 // records stored out of send order
	badMeta    uint64 // records whose topic, key or header differ from what was sent
	missing    uint64 // successes not in the store
	reconnects uint64
	topicAcked [len(demoTopics)]uint64 // by topic (demoTopics)
	sec        *demoSecurity           // -tls only
	latency    hist.Histogram          // send to callback, of the successes
	nats       *natsEngine             // -engine nats: the stored counts are the stream's
	readErr    error                   // -engine nats: the stream could not be read back (no stored counts)
}

// tally is the demo's callback: it runs on the producer's single callback
// goroutine, so its bookkeeping needs no lock; counters the progress line
// reads are atomic.
type tally struct {
	called       bitset                  // by message index
	successSeqs  [len(demoTopics)]bitset // by topic, by sequence ID (sequence IDs are per topic)
	lastSuccess  [len(demoTopics)]uint64 // by topic: message index + 1 of its newest success
	topicAcked   [len(demoTopics)]atomic.Uint64
	doubles      uint64
	outOfOrder   uint64
	acked, timed atomic.Uint64
	failed       atomic.Uint64
	callbacks    atomic.Uint64
	sentAt       []time.Time // by message slot, set by sendLoop
	latency      hist.Histogram
}

// callback is the callback of the message sent from slot.
func (t *tally) callback(slot int, id core.MessageID, msg *core.Message, err error) {
	idx := binary.BigEndian.Uint64(msg.Payload)
	if t.called.set(idx) {
		t.doubles++
		return
	}
	t.callbacks.Add(1)
	switch {
	case err == nil:
		t.acked.Add(1)
		k := demoTopicOf(idx)
		t.topicAcked[k].Add(1)
		t.successSeqs[k].set(uint64(id))
		if idx+1 <= t.lastSuccess[k] {
			t.outOfOrder++ // within its topic: across topics no order is promised
		}
		t.lastSuccess[k] = idx + 1
		t.latency.Record(time.Since(t.sentAt[slot]))
	case errors.Is(err, core.ErrTimeout):
		t.timed.Add(1)
	default:
		t.failed.Add(1)
	}
}

// broker is the embedded broker: a TCP server on a fixed address, with a
// store that outlives restarts.
type demoBroker struct {
	mu     sync.Mutex
	store  broker.Store  // a checkStore, or the natsjs store
	sec    *demoSecurity // -tls: serve TLS with an access list
	addr   string
	server interface{ Close(context.Context) error } // nil while down
	kills  int
}

func (b *demoBroker) up() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.server != nil {
		return nil
	}
	addr := b.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if b.sec != nil {
		bopts, sopts, err := b.sec.serverOptions()
		if err != nil {
			return err
		}
		br, err := broker.New(b.store, bopts...)
		if err != nil {
			return err
		}
		srv, err := server.New(addr, br, sopts...)
		if err != nil {
			return err
		}
		b.server, b.addr = srv, srv.Addr().String()
		return nil
	}
	br, err := broker.New(b.store)
	if err != nil {
		return err
	}
	srv, err := server.New(addr, br)
	if err != nil {
		return err
	}
	b.server, b.addr = srv, srv.Addr().String()
	return nil
}

func (b *demoBroker) down() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.server == nil {
		return
	}
	_ = b.server.Close(context.Background())
	b.server = nil
	b.kills++
}

func demo(ctx context.Context, cfg demoConfig, codecOpt core.Option, stdout io.Writer) (*demoResult, error) {
	chk := newCheckStore()
	b := &demoBroker{store: chk}
	var eng *natsEngine
	if cfg.engine == "nats" {
		var err error
		if eng, err = startNATSEngine(ctx); err != nil {
			return nil, err
		}
		defer eng.close()
		b.store = eng.store
	}
	if cfg.tls {
		sec, err := newDemoSecurity()
		if err != nil {
			return nil, err
		}
		b.sec = sec
	}
	if err := b.up(); err != nil {
		return nil, err
	}
	defer b.down()
	var d transport.Dialer
	if b.sec != nil {
		sd, err := b.sec.dialer(b.addr, demoCertName)
		if err != nil {
			return nil, err
		}
		defer sd.Close()
		d = sd
	} else {
		td, err := tcp.NewDialer(b.addr)
		if err != nil {
			return nil, err
		}
		defer td.Close()
		d = td
	}
	prog := newProgress(stdout)
	connTrouble := startTrouble(prog.note, troubleSummaryEvery)
	defer connTrouble.close()
	opts := []core.Option{
		core.Name("demo"),
		core.Topic(demoTopics[0]),
		core.SendTimeout(cfg.timeout),
		core.MaxPending(cfg.maxPending),
		core.ReconnectBackoff(10*time.Millisecond, 100*time.Millisecond),
		core.ErrorHandler(connTrouble.observe),
	}
	if codecOpt != nil {
		opts = append(opts, codecOpt)
	}
	p, err := core.New(d, opts...)
	if err != nil {
		return nil, err
	}
	over := "TCP"
	if b.sec != nil {
		over = "mutual TLS 1.3, with an access list"
		stopIntruder, err := b.sec.startIntruder(b.addr, []core.Option{core.Name("demo"), core.Topic(demoTopics[0]),
			core.SendTimeout(cfg.timeout), core.ReconnectBackoff(10*time.Millisecond, 100*time.Millisecond)})
		if err != nil {
			return nil, err
		}
		defer stopIntruder()
	}
	fmt.Fprintf(stdout, "inflight demo: broker on %s (%s), %d-byte messages round robin over %d topics for %v, broker killed every %v for %v, SendTimeout %v\n",
		b.addr, over, cfg.size, len(demoTopics), cfg.duration, cfg.killEvery, cfg.downFor, cfg.timeout)

	t := &tally{sentAt: make([]time.Time, cfg.maxPending+1)}
	var sent, refused atomic.Uint64
	sendCtx, stopSending := context.WithTimeout(ctx, cfg.duration)
	defer stopSending()
	start := time.Now()

	var wg sync.WaitGroup
	wg.Go(func() { sendLoop(sendCtx, p, cfg, t, &sent, &refused) })
	wg.Go(func() { killLoop(sendCtx, b, cfg) })
	if eng != nil {
		wg.Go(func() { eng.leaderLoop(sendCtx, cfg.duration, start) })
	}
	showProgress := func() {
		st := p.Stats()
		el := time.Since(start).Seconds()
		prog.show(fmt.Sprintf("%5.1fs  sent %s  acked %s (%s)  pending %s  timed out %s  reconnects %d  broker %s",
			el, count(sent.Load()), count(t.acked.Load()), rate(float64(t.acked.Load())/el),
			count(st.Pending), count(t.timed.Load()), st.Reconnects, b.state()))
	}
	tick := time.NewTicker(cfg.report)
	for done := false; !done; {
		select {
		case <-tick.C:
			showProgress()
		case <-sendCtx.Done():
			done = true
		}
	}
	tick.Stop()
	wg.Wait()
	elapsed := time.Since(start)
	showProgress()
	prog.end()

	// Bring the broker back so that what is pending can still be delivered,
	// then drain: Close waits up to the messages' own timeout.
	if err := b.up(); err != nil {
		return nil, err
	}
	closeCtx, cancel := context.WithTimeout(context.Background(), cfg.timeout+5*time.Second)
	defer cancel()
	_ = p.Close(closeCtx) // what Close fails still gets its callback
	connTrouble.close()
	st := p.Stats()
	b.down()

	stored, dups, disorder, badMeta := chk.snapshot()
	missing := chk.missing(t.successSeqs[:])
	var readErr error
	if eng != nil {
		sc := eng.check(ctx, t.successSeqs[:], t.acked.Load(), prog, cfg.report)
		stored, dups, disorder, badMeta, missing, readErr = sc.records, sc.duplicates, sc.disorder, sc.badMeta, sc.missing, sc.err
	}
	res := &demoResult{
		elapsed:    elapsed,
		kills:      b.kills - 1, // the final stop is not a kill
		sent:       sent.Load(),
		refused:    refused.Load(),
		acked:      t.acked.Load(),
		timedOut:   t.timed.Load(),
		failed:     t.failed.Load(),
		doubleCB:   t.doubles,
		outOfOrder: t.outOfOrder,
		stored:     stored,
		duplicates: dups,
		disorder:   disorder,
		badMeta:    badMeta,
		missing:    missing,
		reconnects: st.Reconnects,
		latency:    t.latency,
		nats:       eng,
		readErr:    readErr,
		sec:        b.sec,
	}
	for i := range res.topicAcked {
		res.topicAcked[i] = t.topicAcked[i].Load()
	}
	accepted := res.sent - res.refused
	if cb := t.callbacks.Load(); cb < accepted {
		res.missingCB = accepted - cb
	}
	return res, nil
}

func (b *demoBroker) state() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.server == nil {
		return "DOWN"
	}
	return "up"
}

// sendLoop sends as fast as the producer takes messages until ctx ends.
// Message objects are reused once their callback ran (see slots); a
// refused message is not held, so its slot is used again at once.
func sendLoop(ctx context.Context, p *core.Producer, cfg demoConfig, t *tally, sent, refused *atomic.Uint64) {
	msgs := make([]core.Message, cfg.maxPending+1)
	cbs := make([]core.Callback, len(msgs))
	free := newSlots(len(msgs))
	for i := range msgs {
		msgs[i].Payload = make([]byte, cfg.size)
		msgs[i].Key = make([]byte, 8)
		msgs[i].Headers = []core.Header{{Key: demoHeader, Value: make([]byte, 4)}}
		cbs[i] = func(id core.MessageID, m *core.Message, err error) {
			t.callback(i, id, m, err)
			free.put(i)
		}
	}
	for idx := uint64(0); ctx.Err() == nil; idx++ {
		slot, ok := free.get(ctx)
		if !ok {
			break
		}
		m := &msgs[slot]
		m.Topic = demoTopics[demoTopicOf(idx)]
		binary.BigEndian.PutUint64(m.Payload, idx)
		demoMeta(idx, m.Key, m.Headers[0].Value)
		t.sentAt[slot] = time.Now()
		sent.Add(1)
		// ctx only stops the loop: the messages live by SendTimeout alone.
		if err := p.SendAsync(context.Background(), m, cbs[slot]); err != nil {
			refused.Add(1) // waited for room past its deadline
			free.put(slot)
		}
	}
}

// killLoop stops the broker every killEvery for downFor, until ctx ends.
func killLoop(ctx context.Context, b *demoBroker, cfg demoConfig) {
	if cfg.killEvery == 0 {
		return
	}
	for {
		select {
		case <-time.After(cfg.killEvery):
		case <-ctx.Done():
			return
		}
		b.down()
		select {
		case <-time.After(cfg.downFor):
		case <-ctx.Done():
		}
		if err := b.up(); err != nil {
			return // the final up() reports it
		}
	}
}

// print writes the report and returns whether every guarantee held (and,
// with -engine nats, the stream was read back to check them).
func (r *demoResult) print(w io.Writer, cfg demoConfig) bool {
	held := true // no guarantee failed
	check := func(name string, bad uint64, detail string) {
		verdict := "ok"
		if bad != 0 {
			verdict, held = "FAILED", false
		}
		fmt.Fprintf(w, "  %-42s %-6s %s\n", name, verdict, detail)
	}
	secs := r.elapsed.Seconds()
	fmt.Fprintf(w, "\nsent %s messages in %.1fs, broker killed %d times, %d reconnects\n", count(r.sent), secs, r.kills, r.reconnects)
	fmt.Fprintf(w, "  acked %s, timed out %s, failed at close %s, refused at send %s\n",
		count(r.acked), count(r.timedOut), count(r.failed), count(r.refused))
	fmt.Fprintf(w, "  throughput %s acked (%.1f MB/s of payload)\n", rate(float64(r.acked)/secs), float64(r.acked)*float64(cfg.size)/secs/1e6)
	fmt.Fprintf(w, "  acked by topic:")
	for i, topic := range demoTopics {
		fmt.Fprintf(w, " %s %s", topic, count(r.topicAcked[i]))
	}
	fmt.Fprintf(w, "\n\n  checked per topic (order, sequence IDs and dedup are per topic):\n")
	if r.nats != nil {
		r.nats.printEvents(w)
		fmt.Fprintln(w)
	}
	accounted := r.acked + r.timedOut + r.failed + r.refused
	check("sent = acked + failed", diff(r.sent, accounted), fmt.Sprintf("%s = %s", count(r.sent), count(accounted)))
	check("every callback exactly once", r.missingCB+r.doubleCB, fmt.Sprintf("%d missing, %d twice", r.missingCB, r.doubleCB))
	check("success order = send order", r.outOfOrder, fmt.Sprintf("%d out of order", r.outOfOrder))
	switch {
	case r.readErr != nil:
		fmt.Fprintf(w, "  %-42s %-6s %v\n", "stream read back", "FAILED", r.readErr)
	case r.nats != nil:
		check("in the stream exactly once, in order", r.duplicates+r.disorder,
			fmt.Sprintf("%d stored twice, %d out of order", r.duplicates, r.disorder))
		check("stored topic, key and header = sent", r.badMeta, fmt.Sprintf("%d differ of %s stored", r.badMeta, count(r.stored)))
		check("success but missing from the stream", r.missing, fmt.Sprintf("%d missing of %s stored", r.missing, count(r.stored)))
	default:
		check("broker duplicates", r.duplicates, fmt.Sprintf("%d sequence IDs stored twice", r.duplicates))
		check("broker stored in send order", r.disorder, fmt.Sprintf("%d out of order", r.disorder))
		check("stored topic, key and header = sent", r.badMeta, fmt.Sprintf("%d differ of %s stored", r.badMeta, count(r.stored)))
		check("success but missing from the broker", r.missing, fmt.Sprintf("%d missing of %s stored", r.missing, count(r.stored)))
	}
	if r.sec != nil {
		refused, acked := r.sec.intruderRefused.Load(), r.sec.intruderAcked.Load()
		var bad uint64
		if refused == 0 || acked > 0 {
			bad = 1
		}
		check("intruder refused the producer's name", bad, fmt.Sprintf("refused %d times, %d of its messages stored", refused, acked))
	}
	switch {
	case !held:
		fmt.Fprintln(w, "\nA GUARANTEE FAILED")
	case r.readErr != nil:
		fmt.Fprintln(w, "\nTHE STREAM COULD NOT BE READ BACK: what it holds was not checked")
	default:
		fmt.Fprintln(w, "\nall guarantees held")
	}
	return held && r.readErr == nil
}

func diff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}
