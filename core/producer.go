package core

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inflightmq/inflight/clock"
	"github.com/inflightmq/inflight/ringbuf"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/wire"
)

// entry is what the ring holds for one message.
type entry struct {
	msg     *Message
	payload []byte
	cb      Callback
	ctx     context.Context // nil when the context can never be done
	stop    func() bool     // stops ctx's AfterFunc; nil without one
}

// Producer sends messages to one broker through a transport.Dialer. All
// methods are safe for concurrent use. A Producer must not be copied.
type Producer struct {
	cfg    config
	dialer transport.Dialer
	ring   *ringbuf.Ring[entry]
	clock  clock.Clock
	epoch  time.Time
	coarse bool // the clock is the system clock: SendAsync reads the shared coarse clock

	comp    *wire.Compressor // nil without compression; pump only
	scratch []byte           // raw batch buffer when compressing; pump only

	// Sequence IDs are seqBase + position + 1. seqBase is fixed by the
	// first HELLO_OK (the broker's last stored seq for this name), before
	// anything is written or reported.
	seqBase atomic.Uint64
	baseSet bool // pump only

	// Cursors beside the ring's head and tail (see the ringbuf doc):
	// head <= acked <= written positions <= tail.
	acked      atomic.Uint64 // every position below is resolved
	maxWritten atomic.Uint64 // every position below was handed to a connection once

	failMu sync.Mutex
	fails  []uint64 // positions that failed, for the dispatcher (out of order)

	dispatchWake chan struct{} // capacity 1
	sweepWake    chan struct{} // capacity 1
	late         lateQueue     // messages that entered out of deadline order

	closing   atomic.Bool
	stop      chan struct{} // closed to stop the pump, sweeper and clock
	stopDisp  chan struct{} // closed to stop the dispatcher, after the last callback
	closed    chan struct{} // closed when Close has finished
	wg        sync.WaitGroup
	dispWG    sync.WaitGroup
	stats     counters
	sessionMu sync.Mutex
	session   *session // current connection, for Close to cut
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
		cfg.name = randomName()
	}
	ring, err := ringbuf.New[entry](cfg.maxPending, cfg.maxPendingBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	p := &Producer{
		cfg:          cfg,
		dialer:       dialer,
		ring:         ring,
		clock:        cfg.clock,
		epoch:        cfg.clock.Now(),
		coarse:       clock.IsSystem(cfg.clock),
		dispatchWake: make(chan struct{}, 1),
		sweepWake:    make(chan struct{}, 1),
		stop:         make(chan struct{}),
		stopDisp:     make(chan struct{}),
		closed:       make(chan struct{}),
	}
	if cfg.codec != wire.CodecNone {
		if p.comp, err = wire.NewCompressor(cfg.codec, cfg.level); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
		}
	}
	if p.coarse {
		// All times are ns since one epoch: the coarse clock's.
		p.epoch = coarse.epoch
		coarse.register(p)
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
	if p.coarse {
		return coarse.now()
	}
	return p.preciseNow()
}

// preciseNow reads the clock (the pump, once per batch; the sweeper).
func (p *Producer) preciseNow() int64 { return int64(p.clock.Now().Sub(p.epoch)) }

func (p *Producer) id(pos uint64) MessageID { return MessageID(p.seqBase.Load() + pos + 1) }

func (p *Producer) report(err error) { p.cfg.onError(err) }

// Flush waits until every message enqueued before the call has been resolved
// and its callback has returned. It returns ctx's error if ctx ends first.
// Flush reports nothing about outcomes: they go to the callbacks. It must not
// be called from a callback.
func (p *Producer) Flush(ctx context.Context) error {
	if err := p.ring.WaitHead(p.ring.Tail(), ctx.Done()); err != nil {
		return ctx.Err()
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
//  4. it waits for all callbacks to return, then stops its goroutines and
//     closes the connection.
//
// Close returns ctx's error if ctx ended before step 2 finished, else nil.
// Close is idempotent: later calls wait for the first to finish (or their own
// ctx to end) and return nil. It must not be called from a callback.
func (p *Producer) Close(ctx context.Context) error {
	if !p.closing.CompareAndSwap(false, true) {
		select {
		case <-p.closed:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer close(p.closed)

	p.ring.Close()
	tail := p.ring.Tail()
	var err error
	if p.ring.WaitHead(tail, ctx.Done()) != nil {
		err = ctx.Err()
		for pos := p.ring.Head(); pos < tail; pos++ {
			if _, ok := p.ring.Resolve(pos, ringbuf.Closed); ok {
				p.failed(pos)
			}
		}
		_ = p.ring.WaitHead(tail, nil) // callbacks must return
	}
	close(p.stop)
	p.cutSession()
	p.wg.Wait()
	if p.coarse {
		coarse.unregister(p)
	}
	if p.comp != nil {
		p.comp.Close()
	}
	close(p.stopDisp)
	p.dispWG.Wait()
	return err
}

// setSession records the pump's current connection so Close can cut it.
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
