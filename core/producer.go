package core

import (
	"context"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inflightmq/inflight/clock"
	"github.com/inflightmq/inflight/ringbuf"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/wire"
)

// Producer sends messages to a broker through a transport.Dialer and owns
// each one from the call that accepts it until its callback has run. New
// makes one, connected or not; it connects and reconnects by itself.
//
// Send with SendAsync (a callback gets the outcome), Send (waits for it),
// SendBatch (several messages in one call) or TrySendAsync (fails with
// ErrQueueFull rather than wait for room). Flush waits for what was sent
// before it; Close stops accepting, drains within its context and fails
// what is left, and every callback has run when it returns. Stats reads
// the counters at any time. See the package doc for the guarantees, and
// Example for a whole program.
//
// All methods are safe for concurrent use. A Producer must not be copied.
type Producer struct {
	// How it works inside (a reader of this package's code, not a user,
	// needs this). Its goroutines and what each drives: the pump (pump.go)
	// dials, handshakes and writes the batches the ledger hands it; the
	// session (session.go) decodes the broker's frames on the transport's
	// goroutine and passes receipts to the ledger; the sweeper (sweeper.go)
	// wakes the ledger at deadlines; the dispatcher (dispatcher.go) runs
	// the callbacks of what the ledger reports ready. The ledger (ledger.go,
	// one per topic, in its lane) alone moves message states and cursors.

	cfg    config
	dialer transport.Dialer
	def    *lane // the lane of the producer's Topic, never forgotten
	budget *budget
	clock  clock.Clock
	epoch  time.Time
	coarse *coarseClock // on the system clock, the shared coarse clock SendAsync reads; else nil

	comp   *wire.Compressor // nil without compression; pump only
	events *notifier        // nil without OnEvent and Logger

	// The lanes, one per topic: lanes maps a topic to its *lane (see
	// laneTable), all lists them (copy on write); both written under
	// lanesMu.
	lanesMu      sync.Mutex
	lanes        atomic.Pointer[laneTable]
	all          atomic.Pointer[[]*lane]
	retiredLanes int          // retired lanes still in all; under lanesMu
	flatLanes    int          // lanes with a flat ring (see maxFlatLanes); under lanesMu
	topics       atomic.Int64 // lanes not retired

	pumpDirty    laneList      // lanes that may have something to write
	pumpParked   atomic.Bool   // the pump waits on pumpWake
	pumpWake     chan struct{} // capacity 1
	pumpPasses   atomic.Uint64 // passes of the pump over its work (for tests of its wake-ups)
	pumpYields   atomic.Uint64 // the pump's yields before it parks (for tests of the same)
	dispDirty    laneList      // lanes that have something to deliver
	dispatchWake chan struct{} // capacity 1
	sweepWake    chan struct{} // capacity 1: a late queue has an earlier deadline

	// The callback goroutine writes disp for every message it delivers,
	// and every SendAsync reads the fields above: the padding keeps them on
	// separate cache lines, or a sender and the dispatcher running on two
	// cores would pass one line back and forth for each message.
	_        [64]byte
	disp     dispLanes // the callback goroutine's state
	_        [64]byte
	dispGoid atomic.Uint64 // the callback goroutine's ID

	closing   atomic.Bool
	stop      chan struct{} // closed to stop the pump and sweeper
	stopDisp  chan struct{} // closed by Close: the dispatcher ends after the last callback
	closed    chan struct{} // closed by the dispatcher after the last callback
	wg        sync.WaitGroup
	dispWG    sync.WaitGroup // the dispatcher goroutine, and any that replaced it
	stats     counters
	sessionMu sync.Mutex
	session   *session // current connection, for Close to cut and detachPayloads to detach

	// closingCalls counts the outcomes the dispatcher took up once closing
	// was set, each before its callback: Close, past its context's end,
	// watches it (see awaitCallbacks). Stats cannot serve: the dispatcher
	// counts acknowledged messages there by runs (see ledger.walk).
	closingCalls atomic.Uint64

	// lastFail is the last connection failure while no connection is
	// ready (nil while one is, and before the first attempt ends): the
	// pump stores it, the dispatcher names it in timeouts and ErrClosed.
	lastFail atomic.Pointer[connFailure]
	fenced   atomic.Pointer[error] // why sends fail: the producer was fenced for good (see fence)

	// incarnation is the producer's epoch: its incarnation of its name,
	// from its HELLO_OK (0: none yet, or given up under WaitForName after a
	// fence); the pump's.
	incarnation uint64
	// sessions counts the sessions whose payloads may go by reference
	// (session.serial); the pump's.
	sessions uint64
	// instance is drawn once (see wire.Hello.Instance): it tells the
	// broker that two HELLOs of epoch 0 come from this one Producer.
	instance uint64
}

// New returns a Producer that connects through dialer and starts its
// goroutines. It does not wait for a connection: messages are accepted at
// once and sent when one is established. Invalid options return an error
// wrapping ErrInvalidOption.
func New(dialer transport.Dialer, opts ...Option) (*Producer, error) {
	if dialer == nil {
		return nil, fmt.Errorf("%w: nil Dialer", ErrInvalidOption)
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.name == "" {
		cfg.name, cfg.randomName = randomName(), true
	}
	var cc *coarseClock
	if clock.IsSystem(cfg.clock) {
		cc = coarse
	}
	p := &Producer{
		cfg:          cfg,
		dialer:       dialer,
		budget:       newBudget(cfg.maxPending, cfg.maxPendingBytes, cfg.memoryLimit),
		clock:        cfg.clock,
		epoch:        cfg.clock.Now(),
		coarse:       cc,
		pumpWake:     make(chan struct{}, 1),
		dispatchWake: make(chan struct{}, 1),
		sweepWake:    make(chan struct{}, 1),
		stop:         make(chan struct{}),
		stopDisp:     make(chan struct{}),
		closed:       make(chan struct{}),
		instance:     rand.Uint64() | 1, // never 0
	}
	def, err := p.makeLane(cfg.topic, true)
	if err != nil {
		return nil, err
	}
	if cfg.memoryLimit == nil {
		def.led.exemptFrom() // until a second topic (see newLane)
	}
	p.def = def
	p.lanes.Store(newLaneTable(minLaneSlots, maphash.MakeSeed()))
	p.topics.Store(1)
	all := []*lane{def}
	p.all.Store(&all)
	if cfg.codec != wire.CodecNone {
		if p.comp, err = wire.NewCompressor(cfg.codec, cfg.level); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
		}
	}
	if p.coarse != nil {
		// All times are ns since one epoch: the coarse clock's.
		p.epoch = p.coarse.epoch
		p.coarse.register(p)
	}
	if p.events = newNotifier(&cfg); p.events != nil {
		go p.events.run() // stopped by Close, after the pump
	}
	if cfg.randomName && cfg.logger != nil {
		cfg.logger.Warn("inflight: no Name given: the producer name is random, so a restarted process cannot take it over, and deduplication does not outlive this process",
			"producer", cfg.name, "topic", cfg.topic)
	}
	p.wg.Go(p.runPump)
	p.wg.Go(p.runSweeper)
	p.dispWG.Go(p.runDispatcher)

	return p, nil
}

// Name returns the producer name used for deduplication.
func (p *Producer) Name() string { return p.cfg.name }

// MaxMessageSize returns the largest message SendAsync accepts: its payload
// plus the bytes its metadata takes (the key, each header's key and value,
// their lengths, 8 for an event time).
func (p *Producer) MaxMessageSize() int { return p.cfg.maxMessageSize() }

// now returns the time in ns since the producer's epoch, from the coarse
// clock when there is one (SendAsync's path).
func (p *Producer) now() int64 {
	if p.coarse != nil {
		return p.coarse.now()
	}
	return p.preciseNow()
}

// preciseNow reads the clock (the pump, once per batch; the sweeper).
func (p *Producer) preciseNow() int64 { return int64(p.clock.Now().Sub(p.epoch)) }

// Flush waits until every message enqueued before the call has been resolved
// and its callback has returned. It returns ctx's error if ctx ends first.
// Flush reports nothing about outcomes: they go to the callbacks. Called
// from a callback it would wait for itself: it returns ErrInCallback at
// once.
func (p *Producer) Flush(ctx context.Context) error {
	if ctx == nil {
		return ErrNilContext
	}
	lanes := p.lanesSnapshot()
	tails := make([]uint64, len(lanes))
	busy := false
	for i, l := range lanes {
		head, tail := l.led.bounds()
		tails[i] = tail
		busy = busy || head < tail
	}
	if !busy {
		return nil
	}
	if p.onDispatcher() {
		return ErrInCallback
	}
	for i, l := range lanes {
		if !l.led.releasedBelow(tails[i], ctx.Done()) {
			return ctx.Err()
		}
	}
	return nil
}

// Close shuts the producer down, in this order:
//
//  1. it stops accepting messages: SendAsync returns ErrClosed, and calls
//     waiting for room return ErrClosed;
//  2. it waits until every pending message is resolved (the connection, if
//     any, keeps sending) or ctx ends;
//  3. if ctx ended, it fails every message still pending with ErrClosed;
//  4. it stops its goroutines and closes the connection;
//  5. it waits until every callback has returned.
//
// Close returns ctx's error if ctx ended before it finished, else nil.
// Every callback has run when Close returns, also when ctx ended: step 5
// goes on past ctx's end as long as callbacks keep running. The one
// exception is a callback that blocks: when no callback has started for
// 100ms after ctx ended, Close takes the running one for blocked and
// returns (within 200ms of ctx's end if that callback had started by
// then); that callback and those after it then run when it returns, each
// exactly once, and the callback goroutine then exits; a later Close(ctx)
// waits for that. The time past ctx's end
// is what failing the rest and running their callbacks takes (a few
// milliseconds for thousands of quick callbacks). Stats read after Close
// returned show nothing pending, unless a callback blocks.
//
// Close may be called from a callback: it then waits as in step 2 (the
// callbacks of the messages it waits for run after the calling callback
// returns) and skips step 5. Close is idempotent: later calls wait for the
// first to finish and return nil, or their own ctx's error if it ends
// first; from a callback they return nil at once. Step 4 is bounded by ctx
// as far as the Dialer honours the context it is given and WriteFrame does
// not block, as the transport contract requires.
func (p *Producer) Close(ctx context.Context) error {
	inCallback := p.onDispatcher()
	if !p.closing.CompareAndSwap(false, true) {
		if inCallback {
			return nil
		}
		select {
		case <-p.closed:
			return p.events.wait(ctx)
		case <-ctx.Done():
			return ctx.Err()
		}
	}

	p.lanesMu.Lock() // no lane is made from now on (see newLane)
	lanes := p.lanesSnapshot()
	p.lanesMu.Unlock()
	tails := make([]uint64, len(lanes))
	for i, l := range lanes {
		l.led.close()
		_, tails[i] = l.led.bounds()
	}
	var err error
	for i, l := range lanes {
		if !p.drain(ctx, l, tails[i], inCallback) {
			err = ctx.Err()
			break
		}
	}
	if err != nil {
		for i, l := range lanes {
			l.led.failBelow(tails[i], ringbuf.Closed)
		}
	}
	close(p.stop)
	p.cutSession()
	p.wg.Wait()
	if p.coarse != nil {
		p.coarse.unregister(p)
	}
	if p.comp != nil {
		p.comp.Close()
	}
	if nerr := p.events.close(ctx); nerr != nil && err == nil {
		err = nerr
	}
	close(p.stopDisp)
	if inCallback {
		return err
	}
	if werr := p.awaitCallbacks(ctx); err == nil {
		err = werr
	}
	return err
}

// blockedCallback is how long Close, past its context's end, lets one
// callback run before it takes that callback for blocked and returns
// without it.
const blockedCallback = 100 * time.Millisecond

// awaitCallbacks waits until the dispatcher has run every callback and
// ended (step 5 of Close). Until ctx ends it waits for that alone. Past
// ctx's end it goes on waiting as long as callbacks keep starting: it
// returns ctx's error when no callback started during a whole
// blockedCallback, that is, when one callback has run that long (or the
// dispatcher was not scheduled that long). A callback that blocks thus
// delays Close by at most 2*blockedCallback past ctx's end.
func (p *Producer) awaitCallbacks(ctx context.Context) error {
	select {
	case <-p.closed:
		p.dispWG.Wait()
		return nil
	case <-ctx.Done():
	}
	// The producer's clock may be a manual one: a blocked callback is
	// measured in real time.
	t := time.NewTicker(blockedCallback)
	defer t.Stop()
	last := p.closingCalls.Load()
	for {
		select {
		case <-p.closed:
			p.dispWG.Wait()
			return ctx.Err()
		case <-t.C:
		}
		n := p.closingCalls.Load()
		if n == last {
			return ctx.Err()
		}
		last = n
	}
}

// drain waits until every position below tail is resolved, and reports
// false if ctx ended first. Outside a callback that is "released" (head
// reached tail). Inside one the dispatcher cannot release: it waits for the
// states instead, woken by each resolution (the wake is the dispatcher's,
// and the caller is the dispatcher).
func (p *Producer) drain(ctx context.Context, l *lane, tail uint64, inCallback bool) bool {
	if !inCallback {
		return l.led.releasedBelow(tail, ctx.Done())
	}
	defer p.signalDispatcher() // the woken-for work is still to be done
	for !l.led.resolvedBelow(tail) {
		select {
		case <-p.dispatchWake:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// setSession records the pump's current connection, so that Close can cut it
// and detachPayloads detach it.
func (p *Producer) setSession(s *session) {
	p.sessionMu.Lock()
	p.session = s
	p.sessionMu.Unlock()
}

func (p *Producer) cutSession() {
	p.sessionMu.Lock()
	s := p.session
	p.sessionMu.Unlock()
	if s != nil {
		s.fail(ErrClosed)
	}
}
