package broker

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inflightmq/inflight/wire"
)

// Broker holds the state shared by all sessions (who holds each producer
// name, the locks of the (topic, name) pairs in use) and the Store.
// It is safe for concurrent use; each Session is driven by one goroutine.
type Broker struct {
	store    Store
	maxFrame int
	cfg      config
	dec      *wire.Decompressor // shared by sessions; bounded by maxFrame
	bufs     bufPool            // the buffers of queued frames
	budget   budget             // the memory of all sessions' frames (MaxBufferedBytes)
	scratch  sync.Pool          // of *appendScratch: appenders' memory, between runs of frames
	start    time.Time          // New's, for since

	mu      sync.Mutex
	names   map[string]*nameState  // only names with a live session (fence.go)
	streams map[stream]*streamLock // only (topic, name) pairs declared on a live session

	sessions       atomic.Int64
	topics         atomic.Int64
	batches        atomic.Uint64
	stored         atomic.Uint64
	duplicates     atomic.Uint64
	protocolErrors atomic.Uint64
	takeovers      atomic.Uint64
	unauthorized   atomic.Uint64
	refusedTakes   atomic.Uint64
	fenced         atomic.Uint64
	nameInUse      atomic.Uint64
	topicErrors    atomic.Uint64
}

// streamLock serializes the Store calls for one (topic, producer name):
// the State of a TOPIC and the Appends of the session that declared it, so
// that a newer session's State, after a takeover, counts what an older
// session's Append in flight stores. Held during Store.State and
// Store.Append, never on a reader.
type streamLock struct {
	mu   sync.Mutex
	refs int // sessions' topics that use it; guarded by Broker.mu
}

// lockFor returns the lock of k, counting one more user.
func (b *Broker) lockFor(k stream) *streamLock {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.streams[k]
	if l == nil {
		l = &streamLock{}
		b.streams[k] = l
	}
	l.refs++
	return l
}

// unlockFor counts one user of k's lock less, forgetting the lock with
// the last.
func (b *Broker) unlockFor(k stream, l *streamLock) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l.refs--; l.refs == 0 && b.streams[k] == l {
		delete(b.streams, k)
	}
}

// Option configures a Broker.
type Option interface{ apply(*config) error }

type config struct {
	maxFrame    int
	maxQueued   int
	maxBuffered int // 0: the default
	maxTopics   int

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
// frames one topic of a producer keeps in flight by default
// (core.DefaultFramesInFlight frames of at most wire.DefaultMaxFrameSize).
const DefaultMaxQueuedBytes = 16 << 20

// MaxQueuedBytes sets how many bytes of checked BATCH frames (their records
// blocks, decompressed, and the index of Records they make: what they are
// charged of MaxBufferedBytes) a session holds for its appender while an
// Append is in flight (default DefaultMaxQueuedBytes; one frame is always
// taken, whatever its size). Beyond it the session's Handle waits, and the
// connection stops reading (TCP backpressure) until the Append in flight
// returned. A topic's window (core.MaxFramesInFlight) keeps one topic
// below the limit; the topics of a connection share it, and many topics'
// large frames (over TCP a connection may have 16 times a topic's window
// in flight) reach it: then Handle waits as said, each time until a topic
// takes its frames. A connection that waits here does not answer PINGs
// meanwhile.
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

// DefaultMaxTopics is the default of MaxTopics.
const DefaultMaxTopics = 1 << 17

// MaxTopics sets how many topics one session (one connection) may declare
// (default DefaultMaxTopics, at least 1, at most 1<<24): a TOPIC beyond it
// is refused with a TOPIC_ERROR of code wire.CodeProtocol, and the
// connection goes on with the topics it has; a producer that needs more
// reconnects, which starts an empty table. A declared topic costs the
// broker about 300 bytes while its connection lives, beside its name.
// Topics refused or ended by a store error do not count.
func MaxTopics(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 || n > 1<<24 {
			return fmt.Errorf("%w: MaxTopics %d not in [1, %d]", ErrInvalidOption, n, 1<<24)
		}
		c.maxTopics = n
		return nil
	})
}

// New returns a Broker that stores into store.
func New(store Store, opts ...Option) (*Broker, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: nil Store", ErrInvalidOption)
	}
	cfg := config{maxFrame: wire.DefaultMaxFrameSize, maxQueued: DefaultMaxQueuedBytes, maxTopics: DefaultMaxTopics}
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
	return &Broker{store: store, maxFrame: cfg.maxFrame, cfg: cfg, dec: dec, bufs: newBufPool(cfg.maxFrame), start: time.Now(),
		budget: budget{limit: int64(cfg.maxBuffered)}, names: make(map[string]*nameState), streams: make(map[stream]*streamLock)}, nil
}

// MaxFrameSize returns the largest frame the broker accepts.
func (b *Broker) MaxFrameSize() int { return b.maxFrame }

// Store returns the broker's store.
func (b *Broker) Store() Store { return b.store }

// Stats is a snapshot of a Broker's counters.
type Stats struct {
	Sessions       int64  // live sessions
	Topics         int64  // topics declared and open on live sessions
	Batches        uint64 // BATCH frames stored (or found duplicate) and acknowledged
	Stored         uint64 // records appended to the store
	Duplicates     uint64 // records skipped because already stored
	ProtocolErrors uint64 // sessions failed for a protocol violation, a store error or ErrBusy
	Takeovers      uint64 // sessions closed because a newer one of the same identity took their name
	// Unauthorized counts HELLOs refused because their credentials were
	// not accepted or their identity may not use the name, and TOPICs
	// refused because it may not write the topic.
	Unauthorized uint64
	// TakeoversRefused counts HELLOs refused because a live session of
	// another identity holds the producer name.
	TakeoversRefused uint64
	// Fenced counts HELLOs refused and sessions ended because a newer
	// incarnation of their producer name holds it (wire.CodeFenced).
	Fenced uint64
	// NameInUse counts HELLOs with Yield refused because a live session
	// of another incarnation holds the name (wire.CodeNameInUse).
	NameInUse uint64
	// TopicErrors counts TOPIC_ERROR frames sent: topics refused
	// (Unauthorized counts those refused for their identity too, MaxTopics,
	// a Store error) and topics ended by a Store error of their Append.
	TopicErrors uint64
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
		Topics:         b.topics.Load(),
		TopicErrors:    b.topicErrors.Load(),
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

// since returns the time since New, monotonic, in ns.
func (b *Broker) since() int64 { return int64(time.Since(b.start)) }
