package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// EventKind says what happened to a producer's connection.
type EventKind uint8

const (
	// EventConnected: a connection completed its handshake (HELLO_OK);
	// Event.Epoch is the producer's incarnation of its name, and
	// Event.Reconnect is false for the producer's first connection. Topics
	// are declared on the connection after it, each when it first has
	// something to write there.
	EventConnected EventKind = iota + 1
	// EventDisconnected: a connection that had completed its handshake
	// ended. Event.Err says why (ErrClosed when the producer closed it).
	EventDisconnected
	// EventDialFailed: a dial failed; Event.Err is the dialer's error. The
	// producer dials again after its backoff.
	EventDialFailed
	// EventHandshakeFailed: a connection was made but did not complete its
	// HELLO; Event.Err wraps ErrHandshake, ErrSequenceConflict or the
	// broker's ERROR. The producer closes it and dials again.
	EventHandshakeFailed
)

var eventNames = [...]string{"", "connected", "disconnected", "dial failed", "handshake failed"}

func (k EventKind) String() string {
	if int(k) < len(eventNames) && k != 0 {
		return eventNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is one change of a producer's connection, as OnEvent and Logger
// see it.
type Event struct {
	Kind      EventKind
	Time      time.Time // when it happened, on the producer's clock
	Err       error     // the cause; nil for EventConnected
	Epoch     uint64    // EventConnected: the producer's incarnation of its name (see Name)
	Reconnect bool      // EventConnected: not the first connection
	// Missed counts events dropped just before this one because the queue
	// of undelivered events was full (see OnEvent). Log records dropped
	// for the Logger are not counted.
	Missed int
}

// maxQueuedEvents bounds the events waiting for a slow OnEvent handler or
// Logger; past it the oldest are dropped and counted in Event.Missed.
const maxQueuedEvents = 1024

// OnEvent sets a function that receives the producer's connection events
// (connected, disconnected with the cause, dial and handshake failures), in
// the order they happened, one at a time, on a goroutine of the producer's
// that does nothing else: never on a transport goroutine, never under a
// lock, never holding up sends, receipts or callbacks. A handler that falls
// behind by more than 1024 events loses the oldest (Event.Missed). Close
// waits, bounded by its context, until the handler has seen every event,
// the last being EventDisconnected with ErrClosed if a connection was up.
// Default: none.
func OnEvent(f func(Event)) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return invalid("OnEvent", nil, "must not be nil")
		}
		c.onEvent = f
		return nil
	})
}

// Logger sets a structured logger for the producer: connection events
// (connected at Info; disconnected, dial and handshake failures at Warn)
// and every error also given to the ErrorHandler (at Warn; a callback's
// panic or Goexit at Error). Records are written from the same goroutine
// as OnEvent's, so a slow handler never holds up the producer. Attributes:
// producer, topic, and per event last_seq, reconnect, err. Default: nil,
// nothing is logged.
func Logger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		c.logger = l
		return nil
	})
}

// notice is one entry of the notifier's queue: an event, or an error to log.
type notice struct {
	ev  Event
	err error // set: an error for the logger, not an event
}

// notifier delivers events and log records on its own goroutine, started
// by New when OnEvent or Logger is set and stopped by Close.
type notifier struct {
	onEvent func(Event)
	log     *slog.Logger
	attrs   []any

	mu     sync.Mutex
	queue  []notice
	missed int
	wake   chan struct{} // capacity 1
	stop   chan struct{} // closed by Close: deliver what is queued, then end
	done   chan struct{} // closed when the goroutine ended
}

func newNotifier(cfg *config) *notifier {
	if cfg.onEvent == nil && cfg.logger == nil {
		return nil
	}
	return &notifier{
		onEvent: cfg.onEvent,
		log:     cfg.logger,
		attrs:   []any{slog.String("producer", cfg.name), slog.String("topic", cfg.topic)},
		wake:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
}

// post queues n without blocking. Safe from any goroutine; a nil notifier
// drops it.
func (n *notifier) post(x notice) {
	if n == nil {
		return
	}
	n.mu.Lock()
	if len(n.queue) == maxQueuedEvents {
		if dropped := n.queue[0]; dropped.err == nil {
			n.missed += 1 + dropped.ev.Missed // it carried earlier drops too
		}
		n.queue = append(n.queue[:0], n.queue[1:]...)
	}
	if x.err == nil {
		x.ev.Missed, n.missed = n.missed, 0
	}
	n.queue = append(n.queue, x)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *notifier) run() {
	defer close(n.done)
	var batch []notice
	for {
		select {
		case <-n.wake:
		case <-n.stop:
		}
		n.mu.Lock()
		batch, n.queue = n.queue, batch[:0]
		n.mu.Unlock()
		for _, x := range batch {
			n.deliver(x)
		}
		clear(batch)
		select {
		case <-n.stop:
			n.mu.Lock()
			empty := len(n.queue) == 0
			n.mu.Unlock()
			if empty {
				return
			}
		default:
		}
	}
}

func (n *notifier) deliver(x notice) {
	if x.err != nil {
		if n.log != nil {
			level := slog.LevelWarn
			if errors.Is(x.err, ErrCallbackPanic) || errors.Is(x.err, ErrCallbackExit) {
				level = slog.LevelError
			}
			n.log.Log(context.Background(), level, "inflight: "+errorTitle(x.err), append(n.attrs, slog.Any("err", x.err))...)
		}
		return
	}
	if n.onEvent != nil {
		n.onEvent(x.ev)
	}
	if n.log != nil && x.ev.Kind == EventConnected {
		n.log.Info("inflight: connected", append(n.attrs, slog.Uint64("epoch", x.ev.Epoch), slog.Bool("reconnect", x.ev.Reconnect))...)
	}
}

// errorTitle names an error for a log message; the error itself is an
// attribute.
func errorTitle(err error) string {
	switch {
	case errors.Is(err, ErrCallbackPanic):
		return "callback panicked"
	case errors.Is(err, ErrCallbackExit):
		return "callback called runtime.Goexit"
	case errors.Is(err, ErrSequenceConflict):
		return "sequence conflict"
	case errors.Is(err, ErrRecordsLost):
		return "broker lost acknowledged records"
	case errors.Is(err, ErrFenced):
		return "fenced by a newer instance of the producer name"
	case errors.Is(err, ErrSequenceExhausted):
		return "no sequence ID left for the producer name"
	case errors.Is(err, ErrHandshake):
		return "handshake failed"
	case errors.Is(err, errDial):
		return "dial failed"
	case errors.Is(err, errConnLost):
		return "connection lost"
	}
	return "error"
}

// close stops the goroutine after it delivered what is queued, and waits for
// that until ctx ends.
func (n *notifier) close(ctx context.Context) error {
	if n == nil {
		return nil
	}
	close(n.stop)
	return n.wait(ctx)
}

// wait waits until the goroutine ended (after close), or ctx ends.
func (n *notifier) wait(ctx context.Context) error {
	if n == nil {
		return nil
	}
	select {
	case <-n.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// event posts a connection event stamped now.
func (p *Producer) event(ev Event) {
	ev.Time = p.clock.Now()
	p.events.post(notice{ev: ev})
}

// report gives err to the ErrorHandler and the Logger.
func (p *Producer) report(err error) {
	p.cfg.onError(err)
	if p.cfg.logger != nil {
		p.events.post(notice{err: err})
	}
}

// The errors the pump reports wrap these, so a logger can name them.
var (
	errDial     = errors.New("inflight: dial failed")
	errConnLost = errors.New("inflight: connection lost")
)
