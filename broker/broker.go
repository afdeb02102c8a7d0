package broker

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/inflightmq/inflight/wire"
)

// Broker holds the per-producer state shared by all sessions and the Store.
// It is safe for concurrent use; each Session is driven by one goroutine.
type Broker struct {
	store    Store
	maxFrame int
	cfg      config
	dec      *wire.Decompressor // shared by sessions; bounded by maxFrame
	bufs     bufPool            // the buffers of queued frames
	budget   budget             // the memory of all sessions' frames (MaxBufferedBytes)
	scratch  sync.Pool          // of *appendScratch: appenders' memory, between runs of frames

	mu        sync.Mutex
	producers map[stream]*producerState // only (topic, name) pairs with a live session

	sessions       atomic.Int64
	batches        atomic.Uint64
	stored         atomic.Uint64
	duplicates     atomic.Uint64
	protocolErrors atomic.Uint64
	takeovers      atomic.Uint64
	unauthorized   atomic.Uint64
	refusedTakes   atomic.Uint64
	fenced         atomic.Uint64
	nameInUse      atomic.Uint64
}

// producerState is the dedup state of one producer name. mu serializes the
// name's HELLOs and Appends (it is held during Store.Append and
// Store.Fence), so an old session's last Append and a new session's HELLO
// see one consistent last stored sequence ID and epoch, and the Store gets
// one call for a name at a time.
type producerState struct {
	mu      sync.Mutex
	owner   *Session
	ownerID Identity // owner's identity
	last    uint64   // highest stored seq
	epoch   uint64   // the name's newest epoch, as this broker knows it (another may have fenced since)
	loaded  bool     // last and epoch were read from the Store (false: read them again)
	dead    bool     // removed from the broker's map; look the name up again
}

// locked runs fn with ps locked and returns fn's error.
func (ps *producerState) locked(fn func(*producerState) error) error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return fn(ps)
}

// Option configures a Broker.
type Option interface{ apply(*config) error }

type config struct {
	maxFrame    int
	maxQueued   int
	maxBuffered int // 0: the default

	auth         bool // Authenticate or Authorize given: default deny
	authenticate func(Credentials) (Identity, error)
	authorize    func(id Identity, topic, producer string) error
	onRefused    func(Refusal)
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// MaxFrameSize sets the largest frame, length prefix included, that the
// broker accepts (default wire.DefaultMaxFrameSize, at least
// wire.MinMaxFrameSize). Larger frames are refused with an ERROR frame.
func MaxFrameSize(n int) Option {
	return optionFunc(func(c *config) error {
		if n < wire.MinMaxFrameSize || n > 1<<30 {
			return fmt.Errorf("%w: MaxFrameSize %d not in [%d, %d]", ErrInvalidOption, n, wire.MinMaxFrameSize, 1<<30)
		}
		c.maxFrame = n
		return nil
	})
}

// DefaultMaxQueuedBytes is the default of MaxQueuedBytes: room for the
// frames a producer keeps in flight by default (core.DefaultFramesInFlight
// frames of at most wire.DefaultMaxFrameSize).
const DefaultMaxQueuedBytes = 16 << 20

// MaxQueuedBytes sets how many bytes of checked BATCH frames (their records
// blocks, decompressed, and the index of Records they make: what they are
// charged of MaxBufferedBytes) a session holds for its appender while an
// Append is in flight (default DefaultMaxQueuedBytes; one frame is always
// taken, whatever its size). Beyond it the session's Handle waits, and the
// connection stops reading (TCP backpressure) until the Append in flight
// returned. A producer's window (core.MaxFramesInFlight) keeps it below
// the limit; a connection that waits here does not answer PINGs meanwhile.
func MaxQueuedBytes(n int) Option {
	return optionFunc(func(c *config) error {
		if n < wire.MinMaxFrameSize || n > 1<<30 {
			return fmt.Errorf("%w: MaxQueuedBytes %d not in [%d, %d]", ErrInvalidOption, n, wire.MinMaxFrameSize, 1<<30)
		}
		c.maxQueued = n
		return nil
	})
}

// MaxBufferedBytes bounds the memory that the BATCH frames of all
// sessions together hold from their check to the end of their Append
// (default DefaultMaxBufferedBytes, or more if MaxFrameSize needs it): their
// records blocks, decompressed, and the index of Records the appenders
// build for Store.Append (see budget.go). MaxQueuedBytes bounds one
// session's share. A frame is charged before it is decompressed, so a
// decompression bomb costs its share of this budget, not memory of its own.
// A frame that finds the budget used up waits, and its connection is not
// read meanwhile, until other sessions' Appends give some back; after 5s it
// is refused with ErrBusy (ERROR code wire.CodeInternal), and the producer
// reconnects and resends. n must leave room for the largest frame: at least
// MaxFrameSize + 4 MiB.
func MaxBufferedBytes(n int) Option {
	return optionFunc(func(c *config) error {
		if n <= 0 || n > 1<<40 {
			return fmt.Errorf("%w: MaxBufferedBytes %d not in [1, %d]", ErrInvalidOption, n, 1<<40)
		}
		c.maxBuffered = n
		return nil
	})
}

// New returns a Broker that stores into store.
func New(store Store, opts ...Option) (*Broker, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: nil Store", ErrInvalidOption)
	}
	cfg := config{maxFrame: wire.DefaultMaxFrameSize, maxQueued: DefaultMaxQueuedBytes}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	// The largest charge of one frame must fit (see frameCharge).
	least := bufSize(cfg.maxFrame) + maxAppendIndex + int(frameIndex)
	switch {
	case cfg.maxBuffered == 0:
		cfg.maxBuffered = max(DefaultMaxBufferedBytes, least)
	case cfg.maxBuffered < least:
		return nil, fmt.Errorf("%w: MaxBufferedBytes %d below %d, what a frame of MaxFrameSize %d may cost", ErrInvalidOption, cfg.maxBuffered, least, cfg.maxFrame)
	}
	dec, err := wire.NewDecompressor(cfg.maxFrame)
	if err != nil {
		return nil, err
	}
	return &Broker{store: store, maxFrame: cfg.maxFrame, cfg: cfg, dec: dec, bufs: newBufPool(cfg.maxFrame),
		budget: budget{limit: int64(cfg.maxBuffered)}, producers: make(map[stream]*producerState)}, nil
}

// MaxFrameSize returns the largest frame the broker accepts.
func (b *Broker) MaxFrameSize() int { return b.maxFrame }

// Store returns the broker's store.
func (b *Broker) Store() Store { return b.store }

// withProducer runs fn with the state of name locked, creating the state if
// needed, and returns fn's error. fn must not block on the network: it holds
// the name's lock, which serializes its HELLO and BATCH handling.
func (b *Broker) withProducer(name stream, fn func(*producerState) error) error {
	ps := b.lookupProducer(name)
	defer ps.mu.Unlock()
	return fn(ps)
}

// lookupProducer returns the live state of name, locked. A state removed
// from the map while we waited for its lock is dead: look the name up again.
func (b *Broker) lookupProducer(name stream) *producerState {
	for {
		b.mu.Lock()
		ps := b.producers[name]
		if ps == nil {
			ps = &producerState{}
			b.producers[name] = ps
		}
		b.mu.Unlock()
		ps.mu.Lock()
		if !ps.dead {
			return ps
		}
		ps.mu.Unlock()
	}
}

// release forgets name's state if s still owns it (s nil: if nobody owns
// it), so that a broker serving many short-lived producers does not grow
// without bound. The Store keeps what matters (the last stored seq and the
// epoch) for the next HELLO.
func (b *Broker) release(name stream, ps *producerState, s *Session) {
	b.mu.Lock()
	ps.mu.Lock()
	if ps.owner == s {
		if s != nil {
			if p, ok := b.store.(Pinner); ok {
				p.Unpin(name.producer) // pinned when s took the name
			}
		}
		ps.owner = nil
		ps.dead = true
		delete(b.producers, name)
	}
	ps.mu.Unlock()
	b.mu.Unlock()
}

// Stats is a snapshot of a Broker's counters.
type Stats struct {
	Sessions       int64  // live sessions
	Batches        uint64 // BATCH frames stored (or found duplicate) and acknowledged
	Stored         uint64 // records appended to the store
	Duplicates     uint64 // records skipped because already stored
	ProtocolErrors uint64 // sessions failed for a protocol violation, a store error or ErrBusy
	Takeovers      uint64 // sessions closed because a newer one of the same identity took their name
	// Unauthorized counts HELLOs refused because their credentials were
	// not accepted or their identity may not use the topic or name.
	Unauthorized uint64
	// TakeoversRefused counts HELLOs refused because a live session of
	// another identity holds the (topic, producer name).
	TakeoversRefused uint64
	// Fenced counts HELLOs refused and sessions ended because a newer
	// incarnation of their producer name holds it (wire.CodeFenced).
	Fenced uint64
	// NameInUse counts HELLOs with Yield refused because a live session
	// of another incarnation holds the name (wire.CodeNameInUse).
	NameInUse uint64
	// BufferedBytes is the frame memory charged now (see
	// MaxBufferedBytes); BufferWaits counts the frames that waited for it,
	// and Busy those refused after waiting too long (ErrBusy).
	BufferedBytes int64
	BufferWaits   uint64
	Busy          uint64
}

// Stats returns the broker's counters. Safe for concurrent use.
func (b *Broker) Stats() Stats {
	used, waits, busy := b.budget.stats()
	return Stats{
		BufferedBytes: used,
		BufferWaits:   waits,
		Busy:          busy,

		Sessions:       b.sessions.Load(),
		Batches:        b.batches.Load(),
		Stored:         b.stored.Load(),
		Duplicates:     b.duplicates.Load(),
		ProtocolErrors: b.protocolErrors.Load(),
		Takeovers:      b.takeovers.Load(),

		Unauthorized:     b.unauthorized.Load(),
		TakeoversRefused: b.refusedTakes.Load(),
		Fenced:           b.fenced.Load(),
		NameInUse:        b.nameInUse.Load(),
	}
}
