package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/metrics/hist"
	"github.com/inflightmq/inflight/wire"
)

// maxPayload is the largest payload produce sends: -size, -payload, or a
// line of -input.
const maxPayload = 1 << 20

// produceFlags are produce's flags, parsed.
type produceFlags struct {
	addr, codec, name, topic, payload, input string
	inputFormat                              string
	topics                                   []string // -topics, split; nil without it
	n, size, rate                            int
	timeout, every, linger, drain            time.Duration
	payloadSet                               bool // -payload given, maybe ""
	key                                      keyFlag
	headers                                  headerFlags
}

func runProduce(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	var f produceFlags
	fs.StringVar(&f.addr, "addr", "127.0.0.1:7070", "broker address, or several gateways' as host:port,host:port (each connection goes to the next that answers)")
	fs.IntVar(&f.n, "n", 1_000_000, "messages to send (not with -input; 1 with -payload unless given)")
	fs.IntVar(&f.size, "size", 100, "payload bytes per message, at least 16: the message's number and send time, then zeros (not with -payload or -input)")
	fs.StringVar(&f.payload, "payload", "", "send this payload in every message, instead of -size bytes")
	fs.StringVar(&f.input, "input", "", "send one message per line of this file (- for stdin), the line without its end, until the end of the input")
	fs.IntVar(&f.rate, "rate", 0, "messages per second (0: as fast as possible)")
	fs.StringVar(&f.codec, "codec", "none", "batch compression: "+codecNames)
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "SendTimeout of every message")
	fs.DurationVar(&f.linger, "linger", 0, "how long a batch that is not full may wait for more messages (0: send what is ready)")
	fs.DurationVar(&f.drain, "drain-timeout", 5*time.Second, "on SIGINT or SIGTERM, how long to wait for the messages already sent to be acknowledged")
	fs.StringVar(&f.name, "name", "", "producer name (default: random, printed at the start)")
	fs.DurationVar(&f.every, "progress", time.Second/2, "progress line interval (0: none; the summary still ends the run)")
	fs.StringVar(&f.topic, "topic", core.DefaultTopic, "topic to write (with -input-format topic-tab, of the lines whose topic is empty)")
	fs.Func("topics", "comma-separated topics to write round robin: message i goes to the (i mod n)th (not with -topic or -input-format topic-tab)", func(v string) error {
		f.topics = strings.Split(v, ",")
		for _, t := range f.topics {
			if err := wire.CheckTopic(t); err != nil {
				return fmt.Errorf("%q: %w", t, err)
			}
		}
		return nil
	})
	fs.StringVar(&f.inputFormat, "input-format", "line", "with -input: line (the line is the payload) or topic-tab (TOPIC<TAB>PAYLOAD, see above)")
	fs.Var(&f.key, "key", `record key: a fixed key, "random" (16 random bytes per message) or "" (none)`)
	fs.Var(&f.headers, "header", "header key=value on every message (repeatable)")
	var sec clientSecurity
	sec.register(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: inflight produce [flags]

Sends messages to a broker (inflight serve) and reports throughput and the
send-to-callback latency distribution: -n messages of -size bytes (a load
generator), the message -payload (once, or -n times), or one message per line of
-input (a file, or - for stdin). Its first line names the producer, for
inflight read -producer. On SIGINT or SIGTERM it stops sending, waits up to
-drain-timeout for what was sent (a second SIGINT stops waiting), and says
how many messages were acknowledged, failed, and left: never sent (not
stored), or sent and not acknowledged in time (stored or not, unknown).

One producer writes several topics over one connection: -topics a,b,c
sends message i to topic number i mod 3 (a, b, c, a, ...); with
-input-format topic-tab each line of -input names its topic: the text
before its first tab is the topic, the rest (tabs included) the payload;
an empty topic is -topic's, and a line without a tab stops produce with
the line's number, after the lines before it were sent:

  printf 'orders\tespresso\npayments\t3.20\n' | inflight produce -input - -input-format topic-tab

Order and exactly-once hold per topic (and producer name), not across
topics.

Exit status 1 if a message failed or it was interrupted. Over TLS with -tls
or any -tls-* flag. A token to present is read from -token-file or
$INFLIGHT_TOKEN, never from the command line.

flags:
`)
		fs.PrintDefaults()
	}
	if code := parseFlags(fs, args, stdout, stderr); code >= 0 {
		return code
	}
	if code := checkProduceFlags(fs, &f, stderr); code >= 0 {
		return code
	}
	codecOpt, err := codecOption(f.codec)
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
	src, err := newSource(&f, stdin)
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	defer src.close()
	if tokenOpt != nil && !sec.tls {
		fmt.Fprintln(stderr, "inflight produce: warning: sending the token without TLS: anyone on the network path can read it")
	}
	d, closeDialer, err := sec.dialer(f.addr)
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	defer closeDialer()
	prog := newProgress(stdout)
	connTrouble := startTrouble(prog.note, troubleSummaryEvery)
	defer connTrouble.close()
	// A broker answers HELLO in milliseconds; waiting the default 5s would
	// hide for that long that -addr is, say, an HTTP server.
	opts := []core.Option{core.SendTimeout(f.timeout), core.Topic(f.topic), core.Linger(f.linger),
		core.ErrorHandler(connTrouble.observe), core.HandshakeTimeout(handshakeTimeout)}
	if f.name != "" {
		opts = append(opts, core.Name(f.name))
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
	prog.note(fmt.Sprintf("producer %q, %s, broker %s", p.Name(), describeTopics(&f), f.addr)) // prog: connTrouble writes too
	r := &producing{p: p, f: &f, src: src, prog: prog, drained: make(chan struct{}), again: secondInterrupt(ctx)}
	// An interrupt closes the producer at once: a SendAsync waiting for
	// room returns, nothing more is accepted, and what was sent drains.
	r.stopDrain = context.AfterFunc(ctx, r.drain)
	r.send(ctx)
	interrupted := r.finish(ctx)
	connTrouble.close()
	return r.report(stdout, stderr, interrupted)
}

// checkProduceFlags refuses values that make no sense and flags that do
// not go together; it returns the exit code to stop with, or -1.
func checkProduceFlags(fs *flag.FlagSet, f *produceFlags, stderr io.Writer) int {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	switch {
	case set["input"] && (set["n"] || set["size"] || set["payload"]):
		return usageError(fs, stderr, "-input sends one message per line until the end of the input: -n, -size and -payload do not apply")
	case set["payload"] && set["size"]:
		return usageError(fs, stderr, "-payload sets the payload: -size does not apply")
	case set["input"] && f.input == "":
		return usageError(fs, stderr, "-input needs a file name, or - for stdin")
	case f.n <= 0:
		return usageError(fs, stderr, "-n must be positive")
	case f.size < 16 || f.size > maxPayload:
		return usageError(fs, stderr, "-size must be in [16, %d]", maxPayload)
	case len(f.payload) > maxPayload:
		return usageError(fs, stderr, "-payload of %d bytes, limit %d", len(f.payload), maxPayload)
	case f.rate < 0:
		return usageError(fs, stderr, "-rate must not be negative")
	case f.timeout <= 0 || f.drain <= 0:
		return usageError(fs, stderr, "-timeout and -drain-timeout must be positive")
	case f.every < 0:
		return usageError(fs, stderr, "-progress must not be negative (0: no progress lines)")
	case f.linger < 0:
		return usageError(fs, stderr, "-linger must not be negative")
	case f.inputFormat != "line" && f.inputFormat != "topic-tab":
		return usageError(fs, stderr, "-input-format must be line or topic-tab, not %q", f.inputFormat)
	case set["input-format"] && !set["input"]:
		return usageError(fs, stderr, "-input-format applies to -input only")
	case f.topics != nil && (set["topic"] || f.inputFormat == "topic-tab"):
		return usageError(fs, stderr, "-topics names the topics: -topic and -input-format topic-tab do not apply")
	}
	if err := checkHostPorts(f.addr); err != nil {
		return usageError(fs, stderr, "-addr: %v", err)
	}
	f.payloadSet = set["payload"]
	if f.payloadSet && !set["n"] {
		f.n = 1 // a message of one's own, not a million of them
	}
	return -1
}

// producing is one run of produce: what it sent and what came back.
// Callbacks run on the producer's one callback goroutine; the counters are
// atomic for the progress line and the end, which read them from the
// sending goroutine.
type producing struct {
	p    *core.Producer
	f    *produceFlags
	src  source
	prog *progress

	start            time.Time
	sent             uint64 // SendAsync calls, by the sending goroutine
	refused          uint64 // SendAsync errors (no callback due)
	refusedErr       error
	acked, ackedSize atomic.Uint64
	failed           atomic.Uint64 // callbacks with an error, but those left
	left             atomic.Uint64 // ErrClosed after an interrupt: still pending when -drain-timeout ran out
	resolved         atomic.Uint64 // callbacks run
	firstErr         atomic.Pointer[error]
	draining         atomic.Bool // an interrupt: ErrClosed counts as left
	stopDrain        func() bool // stops drain from running on an interrupt
	drained          chan struct{}
	again            context.Context // a second interrupt cancels it (nil: none comes)
	aborted          atomic.Bool     // a second interrupt ended the drain
	sendingDone      atomic.Bool
	wake             chan struct{} // after sendingDone, a callback ran
	sentAt           []time.Duration
	latency          hist.Histogram
}

// send sends messages from the source until it ends or ctx does.
// Messages are reused once their callback ran (see slots); a refused
// message is not held, so its slot is used again at once.
func (r *producing) send(ctx context.Context) {
	r.start = time.Now()
	r.wake = make(chan struct{}, 1)
	msgs := make([]core.Message, core.DefaultMaxPending+1)
	cbs := make([]core.Callback, len(msgs))
	r.sentAt = make([]time.Duration, len(msgs))
	free := newSlots(len(msgs))
	for i := range msgs {
		r.f.key.prepare(&msgs[i], r.f.headers)
		cbs[i] = func(_ core.MessageID, m *core.Message, err error) {
			r.callback(i, m, err)
			free.put(i)
		}
	}
	tick, stopTick := progressTicker(r.f.every)
	defer stopTick()
	for i := uint64(0); ctx.Err() == nil; i++ {
		if r.f.rate > 0 && !r.pace(ctx, i) {
			break
		}
		select {
		case <-tick:
			r.show()
		default:
		}
		slot, ok := free.get(ctx)
		if !ok {
			break
		}
		m := &msgs[slot]
		if !r.src.next(ctx, m, i) {
			break
		}
		if r.f.topics != nil {
			m.Topic = r.f.topics[i%uint64(len(r.f.topics))]
		}
		r.f.key.next(m)
		r.sentAt[slot] = time.Since(r.start)
		r.sent++
		// ctx only stops the loop: a message sent lives by SendTimeout, and
		// an interrupt drains it rather than failing it.
		if err := r.p.SendAsync(context.Background(), m, cbs[slot]); err != nil {
			if r.draining.Load() && errors.Is(err, core.ErrClosed) {
				r.sent-- // not sent: interrupted
				break
			}
			r.refused++
			if r.refusedErr == nil {
				r.refusedErr = err
			}
			free.put(slot)
			if errors.Is(err, core.ErrFenced) {
				break // another producer took the name: nothing more can be sent
			}
		}
	}
	r.sendingDone.Store(true)
}

// pace waits until message i is due at -rate; false if ctx ended first.
func (r *producing) pace(ctx context.Context, i uint64) bool {
	wait := time.Duration(float64(i)/float64(r.f.rate)*float64(time.Second)) - time.Since(r.start)
	if wait <= 0 {
		return true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (r *producing) callback(slot int, m *core.Message, err error) {
	switch {
	case err == nil:
		r.latency.Record(time.Since(r.start) - r.sentAt[slot])
		r.ackedSize.Add(uint64(len(m.Payload)))
		r.acked.Add(1)
	case r.draining.Load() && errors.Is(err, core.ErrClosed):
		r.left.Add(1)
	default:
		r.failed.Add(1)
		r.firstErr.CompareAndSwap(nil, &err)
	}
	r.resolved.Add(1)
	if r.sendingDone.Load() {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// drain runs on an interrupt (ctx ended): it closes the producer, which
// stops accepting messages, waits at most -drain-timeout for those it holds
// (less if a second interrupt comes) and fails the rest with ErrClosed
// (counted as left).
func (r *producing) drain() {
	defer close(r.drained)
	r.draining.Store(true)
	note := fmt.Sprintf("interrupted: sending stopped; waiting up to %v (-drain-timeout) for the %s messages pending",
		r.f.drain, count(r.p.Stats().Pending))
	ctx, cancel := context.WithTimeout(context.Background(), r.f.drain)
	defer cancel()
	if r.again != nil {
		note += "; interrupt again to stop now"
		stop := context.AfterFunc(r.again, func() {
			r.aborted.Store(true)
			cancel()
		})
		defer stop()
	}
	r.prog.note(note)
	_ = r.p.Close(ctx)
}

// finish waits for the callback of every message sent, then closes the
// producer; on an interrupt (ctx ends, while sending or after), it waits
// for drain instead and returns true. Either way every callback has run
// when it returns.
func (r *producing) finish(ctx context.Context) (interrupted bool) {
	tick, stopTick := progressTicker(r.f.every)
	defer stopTick()
	accepted := r.sent - r.refused
	for ctx.Err() == nil && r.resolved.Load() < accepted {
		select {
		case <-r.wake:
		case <-tick:
			r.show()
		case <-ctx.Done():
		}
	}
	// An interrupt may have ended the loop before its AfterFunc started
	// drain: stopDrain would then stop it and report true, and nothing
	// would print the note or hear a second interrupt.
	if ctx.Err() == nil && r.stopDrain() {
		// Done before any interrupt: every message has its callback.
		closeCtx, cancel := context.WithTimeout(context.Background(), r.f.timeout)
		defer cancel()
		_ = r.p.Close(closeCtx)
	} else {
		interrupted = true
		for waiting := true; waiting; {
			select {
			case <-r.drained:
				waiting = false
			case <-tick:
				r.show()
			}
		}
	}
	// A Close whose ctx ended returns before the callbacks of the messages
	// it failed: a second one waits for them.
	callbacks, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.p.Close(callbacks)
	if r.f.every > 0 {
		r.show()
	}
	r.prog.end()
	return interrupted
}

// progressTicker ticks every d for the progress line; for d = 0 (no
// progress lines) its channel is nil, and never ready.
func progressTicker(d time.Duration) (<-chan time.Time, func()) {
	if d == 0 {
		return nil, func() {}
	}
	t := time.NewTicker(d)
	return t.C, t.Stop
}

func (r *producing) show() {
	el := time.Since(r.start).Seconds()
	st := r.p.Stats()
	r.prog.show(fmt.Sprintf("%5.1fs  acked %s (%s)  failed %s  pending %s  reconnects %d",
		el, count(r.acked.Load()), rate(float64(r.acked.Load())/el), count(r.failed.Load()+r.refused), count(st.Pending), st.Reconnects))
}

// report prints the summary and the latency, and returns the exit code.
// The counts add up: sent = acknowledged + failed + left.
func (r *producing) report(stdout, stderr io.Writer, interrupted bool) int {
	elapsed := time.Since(r.start)
	a, f, l := r.acked.Load(), r.failed.Load()+r.refused, r.left.Load()
	if interrupted {
		fmt.Fprintf(stdout, "\ninterrupted after %s messages: %s acknowledged, %s failed, %s left%s\n",
			count(r.sent), count(a), count(f), count(l), r.leftNote(l))
	}
	fmt.Fprintf(stdout, "\n%s acked, %s failed (%d refused at send) in %.2fs: %s, %s\n",
		count(a), count(f), r.refused, elapsed.Seconds(), rate(float64(a)/elapsed.Seconds()), bytesRate(float64(r.ackedSize.Load())/elapsed.Seconds()))
	printLatency(stdout, &r.latency)
	code := exitOK
	if f > 0 {
		first := r.refusedErr
		if e := r.firstErr.Load(); e != nil {
			first = *e
		}
		if f == 1 {
			fmt.Fprintf(stderr, "inflight produce: 1 message failed: %v\n", first)
		} else {
			fmt.Fprintf(stderr, "inflight produce: %s messages failed; the first: %v\n", count(f), first)
		}
		code = exitFailure
	}
	if err := r.src.err(); err != nil {
		fmt.Fprintf(stderr, "inflight produce: -input: %v\n", err)
		code = exitFailure
	}
	if interrupted {
		code = exitFailure
	}
	return code
}

// leftNote says what became of the left messages, l of them, once every
// callback ran: those never written to a connection were not stored;
// whether the others were is unknown (their receipts did not come in
// time). Which of them were written, core does not tell message by
// message, but its counters bound it: Stats.Sent counts every message
// written (resends too) and each success was written at least once, so at
// most Sent - Acked of the left ones were written; the rest certainly were
// not.
func (r *producing) leftNote(l uint64) string {
	if l == 0 {
		return ""
	}
	st := r.p.Stats()
	var written uint64
	if st.Sent > st.Acked {
		written = min(l, st.Sent-st.Acked)
	}
	never := l - written
	if never == l {
		return " (never sent: no connection took them, so none was stored)"
	}
	why := fmt.Sprintf("not acknowledged within -drain-timeout %v", r.f.drain)
	if r.aborted.Load() {
		why = "not acknowledged before the second interrupt"
	}
	if never == 0 {
		return " (" + why + ": stored or not, unknown)"
	}
	return fmt.Sprintf(" (%s: %s never sent, so not stored; the other %s stored or not, unknown)", why, count(never), count(written))
}

// describeTopics names the topics produce writes, for its first line.
func describeTopics(f *produceFlags) string {
	switch {
	case f.topics != nil:
		q := make([]string, len(f.topics))
		for i, t := range f.topics {
			q[i] = strconv.Quote(t)
		}
		return "topics " + strings.Join(q, ", ") + " (round robin)"
	case f.inputFormat == "topic-tab":
		return fmt.Sprintf("topics from -input (empty: %q)", f.topic)
	}
	return fmt.Sprintf("topic %q", f.topic)
}

// source makes the payloads produce sends.
type source interface {
	// next sets the payload of m, message number i, and reports whether
	// there is one; false at the end of the source or of ctx. m's previous
	// payload is no longer held by the producer.
	next(ctx context.Context, m *core.Message, i uint64) bool
	// err says why the source ended early (nil: it did not).
	err() error
	close()
}

// newSource returns the source the flags name: -input, -payload, or the
// load generator's -n messages of -size bytes.
func newSource(f *produceFlags, stdin io.Reader) (source, error) {
	switch {
	case f.input == "-":
		return startLines(stdin, nil, f.inputFormat == "topic-tab"), nil
	case f.input != "":
		file, err := os.Open(f.input)
		if err != nil {
			return nil, fmt.Errorf("-input: %w", err)
		}
		return startLines(file, file, f.inputFormat == "topic-tab"), nil
	case f.payloadSet:
		return &fixedSource{payload: []byte(f.payload), n: uint64(f.n)}, nil
	}
	return &loadSource{size: f.size, n: uint64(f.n), start: time.Now()}, nil
}

// loadSource is the load generator: n messages of size bytes, each
// starting with its number and its send time (big-endian uint64s, the time
// in nanoseconds since the start).
type loadSource struct {
	size  int
	n     uint64
	start time.Time
}

func (s *loadSource) next(_ context.Context, m *core.Message, i uint64) bool {
	if i >= s.n {
		return false
	}
	if len(m.Payload) != s.size {
		m.Payload = make([]byte, s.size)
	}
	binary.BigEndian.PutUint64(m.Payload, i)
	binary.BigEndian.PutUint64(m.Payload[8:], uint64(time.Since(s.start)))
	return true
}

func (s *loadSource) err() error { return nil }
func (s *loadSource) close()     {}

// fixedSource is n messages of one payload, shared (the producer only
// reads it).
type fixedSource struct {
	payload []byte
	n       uint64
}

func (s *fixedSource) next(_ context.Context, m *core.Message, i uint64) bool {
	m.Payload = s.payload
	return i < s.n
}

func (s *fixedSource) err() error { return nil }
func (s *fixedSource) close()     {}
