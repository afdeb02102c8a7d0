package core

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/inflightmq/inflight/clock"
	"github.com/inflightmq/inflight/wire"
)

// Option configures a Producer. Options are created by the functions below
// and validated by New, which returns ErrInvalidOption for a value out of
// range.
type Option interface{ apply(*config) error }

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// Defaults of the options.
const (
	DefaultSendTimeout      = 30 * time.Second
	DefaultMaxPending       = 65536
	DefaultMaxPendingBytes  = 64 << 20
	DefaultMaxBatchMessages = 4096
	DefaultMaxBatchBytes    = 1 << 20
	DefaultBackoffMin       = 50 * time.Millisecond
	DefaultBackoffMax       = time.Second
	DefaultDialTimeout      = 5 * time.Second
	DefaultHandshakeTimeout = 5 * time.Second
	DefaultHeartbeat        = 2 * time.Second
	DefaultFramesInFlight   = 4
	DefaultMaxRefusals      = 3
	DefaultTopicIdleTimeout = time.Minute
	DefaultTopic            = wire.DefaultTopic // "default"
	DefaultZeroCopyMin      = 4 << 10
)

type config struct {
	sendTimeout      time.Duration
	maxPending       int
	maxPendingBytes  int64
	topicPendingN    int   // 0: half of maxPending (see topicPending)
	topicPendingB    int64 // 0: half of maxPendingBytes
	memoryLimit      *MemoryLimit
	topicIdle        time.Duration
	blockIfFull      bool
	name             string
	topic            string
	backoffMin       time.Duration
	backoffMax       time.Duration
	dialTimeout      time.Duration
	handshakeTimeout time.Duration
	heartbeat        time.Duration
	maxRefusals      int
	maxBatchMessages int
	maxBatchBytes    int
	maxFrameSize     int
	framesInFlight   int
	zeroCopyMin      int // 0: payloads are always copied into frames
	linger           time.Duration
	codec            wire.Codec
	level            wire.Level
	clock            clock.Clock
	onError          func(error)
	onEvent          func(Event)
	logger           *slog.Logger
	token            *wire.Token // see Token in auth.go; a pointer, so that printing a config prints no token
	access           AccessMode
	randomName       bool // Name not given: New made one up
}

func defaultConfig() config {
	return config{
		sendTimeout:      DefaultSendTimeout,
		maxPending:       DefaultMaxPending,
		maxPendingBytes:  DefaultMaxPendingBytes,
		blockIfFull:      true,
		topicIdle:        DefaultTopicIdleTimeout,
		topic:            DefaultTopic,
		backoffMin:       DefaultBackoffMin,
		backoffMax:       DefaultBackoffMax,
		dialTimeout:      DefaultDialTimeout,
		handshakeTimeout: DefaultHandshakeTimeout,
		heartbeat:        DefaultHeartbeat,
		maxRefusals:      DefaultMaxRefusals,
		maxBatchMessages: DefaultMaxBatchMessages,
		maxBatchBytes:    DefaultMaxBatchBytes,
		maxFrameSize:     wire.DefaultMaxFrameSize,
		framesInFlight:   DefaultFramesInFlight,
		zeroCopyMin:      DefaultZeroCopyMin,
		level:            wire.LevelFastest,
		clock:            clock.System(),
		onError:          func(error) {},
	}
}

func invalid(name string, v any, why string) error {
	return fmt.Errorf("%w: %s %v: %s", ErrInvalidOption, name, v, why)
}

// durationOption validates a positive duration and stores it with set.
func durationOption(name string, d time.Duration, set func(*config, time.Duration)) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return invalid(name, d, "must be positive")
		}
		set(c, d)
		return nil
	})
}

// SendTimeout sets how long a message may stay unacknowledged after SendAsync
// before its callback gets ErrTimeout (default 30s). A context deadline
// earlier than that wins. The timeout runs whether or not a connection
// exists.
func SendTimeout(d time.Duration) Option {
	return durationOption("SendTimeout", d, func(c *config, d time.Duration) { c.sendTimeout = d })
}

// MaxPending sets how many messages may be pending (enqueued and not yet
// resolved) at once, every topic counted (default 65536: a topic's share,
// half, is what a producer of one topic had before topics). Beyond it,
// SendAsync waits or fails
// with ErrQueueFull (see BlockIfFull).
func MaxPending(n int) Option {
	return optionFunc(func(c *config) error {
		if n <= 0 || n > 1<<30 {
			return invalid("MaxPending", n, "must be in [1, 2^30]")
		}
		c.maxPending = n
		return nil
	})
}

// MaxPendingBytes sets how many bytes (payload plus metadata, see
// Producer.MaxMessageSize) may be pending at once
// (default 64 MiB). One message larger than the limit is still accepted
// when nothing else is pending.
func MaxPendingBytes(n int64) Option {
	return optionFunc(func(c *config) error {
		if n <= 0 {
			return invalid("MaxPendingBytes", n, "must be positive")
		}
		c.maxPendingBytes = n
		return nil
	})
}

// MaxPendingPerTopic sets how many messages one topic may have pending, its
// share of MaxPending (default: half of MaxPending, at least 1). A topic the
// broker does not acknowledge (a store that refuses it, a full JetStream
// subject, a slow Append) holds at most its share, so the other topics
// keep the rest; raise it to MaxPending for a producer that writes one
// topic and wants the whole budget for it.
func MaxPendingPerTopic(n int) Option {
	return optionFunc(func(c *config) error {
		if n <= 0 || n > 1<<30 {
			return invalid("MaxPendingPerTopic", n, "must be in [1, 2^30]")
		}
		c.topicPendingN = n
		return nil
	})
}

// MaxPendingBytesPerTopic sets how many bytes one topic may have pending,
// its share of MaxPendingBytes (default: half of MaxPendingBytes). See
// MaxPendingPerTopic.
func MaxPendingBytesPerTopic(n int64) Option {
	return optionFunc(func(c *config) error {
		if n <= 0 {
			return invalid("MaxPendingBytesPerTopic", n, "must be positive")
		}
		c.topicPendingB = n
		return nil
	})
}

// topicPending returns a topic's share of MaxPending.
func (c *config) topicPending() int {
	if c.topicPendingN > 0 {
		return min(c.topicPendingN, c.maxPending)
	}
	return max(c.maxPending/2, 1)
}

// topicPendingBytes returns a topic's share of MaxPendingBytes.
func (c *config) topicPendingBytes() int64 {
	if c.topicPendingB > 0 {
		return min(c.topicPendingB, c.maxPendingBytes)
	}
	return max(c.maxPendingBytes/2, 1)
}

// WithMemoryLimit makes the producer count its pending bytes against m too,
// a limit it shares with every other producer given m (see MemoryLimit).
func WithMemoryLimit(m *MemoryLimit) Option {
	return optionFunc(func(c *config) error {
		if m == nil {
			return invalid("WithMemoryLimit", m, "must not be nil")
		}
		c.memoryLimit = m
		return nil
	})
}

// TopicIdleTimeout sets how long a topic other than the producer's Topic
// may have nothing pending before the producer forgets its state (default
// one minute): its ring, its sequence counter. The topic's next message
// costs one round trip to the broker, which says where its sequence IDs
// go on: a forgotten topic never reuses a sequence ID.
func TopicIdleTimeout(d time.Duration) Option {
	return durationOption("TopicIdleTimeout", d, func(c *config, d time.Duration) { c.topicIdle = d })
}

// BlockIfFull sets whether SendAsync waits for room when the queue is full
// (true, the default: it waits until room is made, the message's deadline
// passes, its context ends, or the producer closes) or fails at once with
// ErrQueueFull (false).
func BlockIfFull(block bool) Option {
	return optionFunc(func(c *config) error { c.blockIfFull = block; return nil })
}

// Name sets the producer name, the key of the broker's deduplication
// (default: "inflight-" and 16 random hex digits). Deduplication is per
// (topic, Name), and a name has one writer at a time, across all its
// topics: each Producer is a new instance (incarnation) of its name, which
// the broker gives an epoch at its first connection; by default
// (Access(Fencing)) a new instance takes the name over and fences the
// older one on every topic if it still lives, whose pending messages then
// fail with ErrFenced.
//
// A process restarted with the same name takes the name over and
// continues its sequence IDs after the name's last stored one: what the
// old process had stored is kept once, what it had pending and not stored
// is not resent (those messages were its callbacks' to report, and its
// process is gone). Deduplication covers the resends of one Producer
// across reconnects and broker restarts; a message the application sends
// again through a new Producer is a new message.
//
// Give each producer process a Name of its own that outlives its restarts
// (a shard or host ID, a StatefulSet pod name): with the random default,
// two processes never clash, but nothing ties a restarted process to what
// it stored before. New logs a warning to the Logger when the name is
// random.
func Name(name string) Option {
	return optionFunc(func(c *config) error {
		if name == "" || len(name) > wire.MaxProducerNameLen {
			return invalid("Name", fmt.Sprintf("%q", name), fmt.Sprintf("must be 1 to %d bytes", wire.MaxProducerNameLen))
		}
		c.name = name
		return nil
	})
}

// AccessMode says what a Producer does when another instance of its Name
// is live: a process that restarted while its old instance
// still runs, two processes given one name by mistake, a standby waiting
// for the primary to go. See Access.
type AccessMode uint8

const (
	// Fencing (the default): the newest instance takes the name. Its first
	// connection fences the instance that holds the name, whose pending
	// messages fail with ErrFenced, whose later sends fail with ErrFenced
	// at once, and which dials no more. As Kafka's producer epochs and
	// Pulsar's ExclusiveWithFencing.
	Fencing AccessMode = iota
	// WaitForName: the instance does not take the name from a live one.
	// While another instance is connected to the broker with the name, its
	// connection is refused (ErrNameInUse, to the ErrorHandler) and it
	// redials with backoff; its messages wait, within their SendTimeout.
	// When an instance of the default mode fences it, its messages that
	// were written and not yet acknowledged fail with ErrFenced (they may
	// have been stored), and it waits again until the name is free, then
	// takes it with a new epoch and sends the messages that were never
	// written, with sequence IDs after the name's last stored one. As
	// Pulsar's WaitForExclusive. A broker knows only its own connections:
	// right after a broker restart, or between gateways sharing a
	// JetStream stream, a waiting instance may take the name from a live
	// one, which is then fenced; and a holder that vanished without closing
	// its connection holds the name until the broker notices (its
	// heartbeat or idle timeout).
	WaitForName
	// Exclusive: as WaitForName, but a refusal because another instance is
	// live fails every pending message at once with ErrNameInUse (messages
	// sent later wait for the next attempt, one backoff later), and when
	// fenced it fails as Fencing does. As Pulsar's Exclusive.
	Exclusive
)

var accessNames = [...]string{"Fencing", "WaitForName", "Exclusive"}

func (m AccessMode) String() string {
	if int(m) < len(accessNames) {
		return accessNames[m]
	}
	return fmt.Sprintf("AccessMode(%d)", uint8(m))
}

// Access sets what the producer does when another instance of its name is
// live (default Fencing): see AccessMode.
func Access(m AccessMode) Option {
	return optionFunc(func(c *config) error {
		if m > Exclusive {
			return invalid("Access", m, "must be Fencing, WaitForName or Exclusive")
		}
		c.access = m
		return nil
	})
}

// Topic sets the producer's default topic (default DefaultTopic,
// "default"): the topic of every message whose Message.Topic is empty. A
// producer writes any topic, each message naming its own; sequence IDs,
// order and deduplication are per (topic, Name). A topic is 1 to 255 bytes
// of ASCII letters, digits, '.', '_' and '-'.
func Topic(name string) Option {
	return optionFunc(func(c *config) error {
		if err := wire.CheckTopic(name); err != nil {
			return invalid("Topic", fmt.Sprintf("%q", name), "must be 1 to 255 bytes of letters, digits, '.', '_' and '-'")
		}
		c.topic = name
		return nil
	})
}

// ReconnectBackoff sets the bounds of the exponential backoff, with full
// jitter, between connection attempts (defaults 50ms and 1s, as Kafka's
// clients: a producer reconnects within about a second of its broker's
// return, however long the broker was away). Each failed dial or handshake
// doubles the longest wait, from min up to max. So does a connection that
// completed its handshake and then ended before it had stayed up that
// long: a broker that accepts the HELLO and fails the connection at once
// (a store failing every append, a refused sequence ID) is retried with
// growing waits, not in a loop. A connection that stayed up at least that
// long proved healthy: the wait is back at min, and the producer redials
// at once when it ends. The producer never dials more than once per min.
// A larger max spares a broker that many producers redial; a smaller one
// finds it sooner.
func ReconnectBackoff(min, max time.Duration) Option {
	return optionFunc(func(c *config) error {
		if min <= 0 || max < min {
			return invalid("ReconnectBackoff", fmt.Sprintf("[%v, %v]", min, max), "need 0 < min <= max")
		}
		c.backoffMin, c.backoffMax = min, max
		return nil
	})
}

// DialTimeout bounds one dial (default 5s).
func DialTimeout(d time.Duration) Option {
	return durationOption("DialTimeout", d, func(c *config, d time.Duration) { c.dialTimeout = d })
}

// HandshakeTimeout bounds the wait for the broker's HELLO_OK after a dial
// (default 5s).
func HandshakeTimeout(d time.Duration) Option {
	return durationOption("HandshakeTimeout", d, func(c *config, d time.Duration) { c.handshakeTimeout = d })
}

// Heartbeat sets the heartbeat interval d (default 2s): after d without any
// frame from the broker the producer sends a PING, and after 2*d it declares
// the connection dead (ErrHeartbeat), closes it and dials again. This is what
// detects a half-open connection: a peer that vanished without closing.
func Heartbeat(d time.Duration) Option {
	return durationOption("Heartbeat", d, func(c *config, d time.Duration) { c.heartbeat = d })
}

// MaxRefusals sets after how many refusals in a row, of the kinds that do
// not heal by waiting, the producer stops letting its messages wait
// (default 3). Those refusals are the broker's answers to a HELLO that only
// a change of configuration on one side can turn: ErrUnauthorized (the
// credentials, the grants, or a name held by another identity) and
// ErrProtocolVersion. At the nth refusal since the last connection the
// broker accepted, and at each one after it, every pending message fails
// at once with the refusal (errors.Is matches ErrUnauthorized or
// ErrProtocolVersion, and errors.As a *wire.RemoteError); messages sent
// meanwhile wait for the next refusal, one backoff later. The producer
// keeps redialing with backoff all along, so it recovers by itself once
// the broker accepts it. 0 turns this off: messages wait out their
// SendTimeout, and their ErrTimeout names the refusal.
//
// The default tolerates a refusal that heals quickly: an access list being
// reloaded as the producer dials, a name whose holder of another identity
// is going away. With the default ReconnectBackoff the third refusal comes
// 0.1 to 0.15s after the first, far sooner than SendTimeout.
func MaxRefusals(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 0 {
			return invalid("MaxRefusals", n, "must not be negative")
		}
		c.maxRefusals = n
		return nil
	})
}

// MaxBatchMessages sets the most messages in one BATCH frame (default 4096).
// Batching is natural: the producer sends what is ready at once and lets the
// next batch grow while the connection is busy.
func MaxBatchMessages(n int) Option {
	return optionFunc(func(c *config) error {
		if n <= 0 || n > 1<<20 {
			return invalid("MaxBatchMessages", n, "must be in [1, 2^20]")
		}
		c.maxBatchMessages = n
		return nil
	})
}

// MaxBatchBytes sets the target size of one BATCH frame (default 1 MiB). A
// single message larger than it still travels alone in a frame. Over a
// transport that takes several frames at once (tcp, stdnet), a frame of
// mid-sized messages closes sooner, at 128 KiB (or MaxBatchBytes, if
// lower): one that would pass 128 KiB holding 64 to 256 messages (of about
// 510 B to 2040 B, metadata included) closes there. From the producer's
// copy to the broker's checksum it stays in the CPU's caches, where a
// frame of 1 MiB does not (over tcp, one topic: 1 KiB messages 23-35%
// faster, 512 B 10-20%; frames of smaller and larger messages are as
// before; docs/performance.md, "Tenth round"). A producer that compresses
// (Compression) grows every frame to MaxBatchBytes: a larger frame
// compresses better. Over tcp, one topic, MaxBatchBytes(128 << 10) made
// 16 KiB messages 27% faster while their payloads were in the caches but
// 22% slower while they were not ("Ninth round").
func MaxBatchBytes(n int) Option {
	return optionFunc(func(c *config) error {
		if n < wire.MinMaxFrameSize || n > 1<<30 {
			return invalid("MaxBatchBytes", n, fmt.Sprintf("must be in [%d, 2^30]", wire.MinMaxFrameSize))
		}
		c.maxBatchBytes = n
		return nil
	})
}

// MaxFramesInFlight sets how many BATCH frames of a topic may be
// unacknowledged at once (default DefaultFramesInFlight): written, and
// their RECEIPT not yet come. At the limit the producer writes nothing more
// of the topic until a receipt arrives, and the messages sent meanwhile
// wait in the queue, to leave in the next frame together. So a broker that
// takes longer to store a frame (an fsync, a replicated write) gets bigger
// frames, not a deeper queue of small ones, and the time a message waits
// stays about one store round trip whatever the rate. A frame that
// MaxBatchBytes (or the connection's frame limit, or the 128 KiB of a
// frame of mid-sized messages: see MaxBatchBytes) closed counts less: it
// cannot grow, and more of them in flight is what keeps the connection
// busy. It counts the share of 2 MiB that the bound that closed it (or its
// own size, if larger) has, in sixteenths rounded up, at most half a
// frame: a topic has at most n frames in flight, or of such full ones 2n
// of 1 MiB (the default) or more, 16n of 128 KiB or less, and up to 2n MiB
// of those between. Like Kafka's
// max.in.flight.requests.per.connection, but frames are never reordered: a
// connection delivers them in order, and a resend after a reconnect starts
// at the oldest unresolved message. Heartbeat PINGs are not counted.
//
// The topics of a connection share a window too: n frames in all on a
// transport that takes frames one by one (transport/mem), 16n on one that
// takes several at once (transport.FramesWriter: tcp, stdnet), the frames
// of a topic whose own window is full not counted (a topic the broker
// holds back takes none of the others' room). Topics that wait for room in
// it get it in the order they asked.
func MaxFramesInFlight(n int) Option {
	return optionFunc(func(c *config) error {
		if n <= 0 || n > 1024 {
			return invalid("MaxFramesInFlight", n, "must be in [1, 1024]")
		}
		c.framesInFlight = n
		return nil
	})
}

// ZeroCopyMin sets the smallest payload that the connection writes from
// the Message's own memory rather than from a copy in the frame (default
// DefaultZeroCopyMin, 4 KiB; 0 turns it off). It applies to messages
// without Key, Headers or EventTime, on a transport that can write a frame
// in pieces (transport.Splicer: tcp on Linux), and not with Compression
// or to a message written again after a reconnect; other payloads are
// copied. The Message's ownership rule is what allows it: the producer
// keeps Payload from SendAsync until the callback returned (or Send
// returned), and before it runs the callback of a message that failed
// (its deadline, its context, Close) while its frame was still being
// written, it has the connection copy what it has not written yet, which
// waits for the write in progress only, never for the network. Over tcp,
// one topic, one payload over and over, it made 2-64 KiB messages 20-34%
// faster (16 KiB: 25%, with 22% less CPU); payloads sent in turn from 64
// MiB of them (out of the CPU's caches) were 0.91x to 1.02x, and 1 KiB
// ones 11% slower, which is why the default stops at 4 KiB (docs/performance.md,
// "Thirteenth round"). The copy a failure asks for covers every such frame
// the connection holds then: a producer whose messages fail often while
// the broker is slow to read (short deadlines, canceled contexts) pays
// for it, and may want it off. A caller that breaks the ownership rule
// (changes a payload before its callback) now breaks the frame's CRC: the
// broker refuses the frame and drops the connection, and the producer
// writes the topics' frames again, the changed payload with them.
func ZeroCopyMin(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 0 {
			return invalid("ZeroCopyMin", n, "must not be negative")
		}
		c.zeroCopyMin = n
		return nil
	})
}

// Linger sets how long the writer may wait for a batch to fill before it
// sends a batch that is not full (default 0: natural batching, which sends
// whatever is ready at once and lets the next batch grow while the
// connection is busy). A positive linger trades latency for bigger batches,
// which helps compression. A batch is full at as many messages as the
// topic's last frame held that a byte bound closed (MaxBatchBytes: see
// there), or at MaxBatchMessages before the first such frame and again
// once the messages got smaller (a frame filled by MaxBatchMessages, or
// holding that many in less than half the bytes).
func Linger(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return invalid("Linger", d, "must not be negative")
		}
		c.linger = d
		return nil
	})
}

// Compression sets the codec that compresses each batch (default
// wire.CodecNone) and its level (wire.LevelFastest, LevelDefault or
// LevelBetter; zstd uses all three, s2 distinguishes LevelBetter, snappy
// none). A batch whose compressed form does not save at least 1/8 is sent
// uncompressed (flagged CodecNone in its frame).
func Compression(codec wire.Codec, level wire.Level) Option {
	return optionFunc(func(c *config) error {
		if err := wire.CheckCompression(codec, level); err != nil {
			return invalid("Compression", fmt.Sprintf("%v/%v", codec, level), err.Error())
		}
		c.codec, c.level = codec, level
		return nil
	})
}

// MaxFrameSize sets the largest frame the producer sends (default
// wire.DefaultMaxFrameSize, 4 MiB); the broker may lower it in HELLO_OK. It
// bounds the largest message: see MaxMessageSize.
func MaxFrameSize(n int) Option {
	return optionFunc(func(c *config) error {
		if n < wire.MinMaxFrameSize || n > 1<<30 {
			return invalid("MaxFrameSize", n, fmt.Sprintf("must be in [%d, 2^30]", wire.MinMaxFrameSize))
		}
		c.maxFrameSize = n
		return nil
	})
}

// WithClock sets the clock used for deadlines and backoff (default: the
// system clock). Tests pass a *clock.Manual to control time.
func WithClock(c clock.Clock) Option {
	return optionFunc(func(cfg *config) error {
		if c == nil {
			return invalid("WithClock", nil, "must not be nil")
		}
		cfg.clock = c
		return nil
	})
}

// ErrorHandler sets a function that receives errors the producer handles by
// itself but a user may want to log: failed dials, lost connections,
// protocol errors (ErrProtocol, ErrHandshake, ErrSequenceConflict) and
// callback panics (ErrCallbackPanic). It is called from the producer's
// goroutines, must be safe for concurrent use and must not block. Default:
// errors are dropped.
func ErrorHandler(f func(error)) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return invalid("ErrorHandler", nil, "must not be nil")
		}
		c.onError = f
		return nil
	})
}

// maxMessageSize is the largest record (payload and metadata, as validate
// counts it) one BATCH frame can carry.
func (c *config) maxMessageSize() int {
	return c.maxFrameSize - wire.BatchHeaderSize - wire.RecordOverhead(c.maxFrameSize)
}

func randomName() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return "inflight-" + hex.EncodeToString(b[:])
}
