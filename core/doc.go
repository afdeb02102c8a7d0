// Package core is the inflight producer: a pending queue that owns every
// message from SendAsync until its callback has run, and that treats
// connections as disposable writers of frames.
//
// # Use
//
// New makes a Producer on a transport.Dialer: transport/tcp or
// transport/stdnet to reach a broker over the network (inflight serve),
// transport/mem for a broker in the same process. It connects by itself,
// and reconnects whenever the connection is lost; messages are accepted
// from the start.
//
//	d, err := tcp.NewDialer("broker:7070")
//	...
//	p, err := core.New(d, core.Name("orders-1"))
//	...
//	err = p.SendAsync(ctx, &core.Message{Topic: "orders", Payload: b},
//		func(id core.MessageID, msg *core.Message, err error) {
//			// exactly once: err == nil when the broker stored it
//		})
//	...
//	err = p.Close(ctx) // drains within ctx; every callback has run
//
// SendAsync enqueues and returns; its callback gets the outcome. Send waits
// for the outcome, SendBatch enqueues several messages at once, and
// TrySendAsync never waits for room. Flush waits until everything sent
// before it is resolved and its callback returned; Close stops accepting,
// waits for what is pending (bounded by its context) and fails the rest.
// Give each producer process a Name of its own: the broker deduplicates by
// (topic, Name) and sequence ID, and a process restarted under its name
// continues its sequence IDs after the last one stored. Options set the
// limits (SendTimeout, MaxPending, MaxPendingBytes), batching, compression,
// and where errors and connection events go (ErrorHandler, OnEvent,
// Logger); Stats reads the counters.
//
// # Guarantees
//
//   - Every SendAsync that returns nil leads to exactly one callback; every
//     SendAsync that returns an error leads to none.
//   - Every message resolves by its deadline: min(its context's deadline,
//     SendAsync time + SendTimeout), whether or not a connection exists,
//     and never before it: a timeout is never early, even on a starved
//     machine (it may be late by up to two milliseconds, or by as long as
//     the producer's goroutines were not scheduled). The callback runs
//     promptly after (typically well under a millisecond), unless an
//     earlier callback still runs.
//   - Nothing waits forever on the callback goroutine: Send returns by its
//     message's deadline, and Close and Flush by their context, also when
//     called from a callback or while a callback blocks. A callback that
//     panics or calls runtime.Goexit never stops later callbacks.
//   - Every callback has run when Close returns, also when its context
//     ended first (the messages still pending then fail with ErrClosed).
//     The one exception is a callback that blocks: when no callback has
//     started for 100ms after Close's context ended, Close takes the
//     running one for blocked and returns; it and the callbacks held up
//     behind it run after Close returned.
//   - A message whose deadline passed or whose context ended before it was
//     written is never written.
//   - A message's error says why: a timeout or ErrClosed while the producer
//     has no connection also wraps the last connection failure (errors.Is
//     matches both). A broker that refuses the producer in a way waiting
//     cannot heal (ErrUnauthorized, ErrProtocolVersion) fails the pending
//     messages with the refusal after MaxRefusals refusals in a row.
//   - Outcomes are reported in sequence order, which is SendAsync order for
//     one goroutine: successes, and messages the broker refused as too
//     large. The one exception: a message that fails by its own deadline
//     or context, or by Close, may be reported before older messages that
//     are still pending.
//   - After a reconnect, the producer learns from the broker which messages
//     it stored, reports those as successes, and resends the rest in order;
//     the broker drops duplicates by sequence ID, so no success is stored
//     twice. A message reported as failed may still have been stored (the
//     receipt lost the race with the deadline).
//   - A producer name has one writer at a time, across all its topics:
//     each Producer is a new instance of its Name, with an epoch the broker
//     stores before it accepts it. By default the newest instance takes the
//     name over, and the older one, if it still runs, is fenced on every
//     topic, also topics the newer one never wrote: its pending messages
//     fail with ErrFenced, never acknowledged as duplicates of the newer
//     one's records, and so do its later sends. This holds across broker
//     restarts and between brokers that share a store. See Name for what a
//     restarted process gets, and Access for waiting for the name instead.
//   - Sequence IDs never wrap: a name whose last stored sequence ID is
//     wire.MaxSeq fails its messages with ErrSequenceExhausted.
//   - Backpressure: at most MaxPending messages and MaxPendingBytes bytes
//     (payload plus metadata) are pending, every topic counted, and one
//     topic holds at most its share; beyond that SendAsync waits
//     (BlockIfFull, bounded by the message's deadline) or fails with
//     ErrQueueFull.
//
// # Messages and topics
//
// A Message has a Topic (empty: the producer's Topic option, default
// "default"), a Payload and optional metadata: a Key, ordered Headers and
// an EventTime, all referenced until its callback returned, all stored by
// the broker with the record. See Message for the limits.
//
// One producer writes any number of topics over one connection. Sequence
// IDs, order of successes, resends and deduplication are per (topic, Name):
// the guarantees above that speak of order hold within a topic, and there
// is no order between topics. Flush and Close wait for every topic.
// MaxPending and MaxPendingBytes count every topic, each topic holding at
// most its share (MaxPendingPerTopic), so a topic the broker does not
// acknowledge fails by its deadlines without stalling the others; a
// MemoryLimit may be shared by several producers. A topic costs no
// goroutine; one with nothing pending for TopicIdleTimeout is forgotten,
// and its next message learns the broker's last sequence ID again, so no
// sequence ID is reused.
//
// # Goroutines
//
// A Producer owns three goroutines, started by New and stopped by Close: one
// dials with backoff, handshakes and writes batches (while connected, a
// heartbeat goroutine beside it), one expires messages at their deadline,
// and one runs the callbacks, one at a time; with OnEvent or Logger, a
// fourth delivers connection events and log records. Receipts are resolved
// on the transport's goroutine without blocking. Producers on the
// system clock share one coarse clock goroutine, which refreshes a cached
// time for SendAsync while any of them has messages pending, sleeps when
// none has, and exits when the last producer closes.
package core
