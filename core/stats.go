package core

import "sync/atomic"

type counters struct {
	sent       atomic.Uint64
	acked      atomic.Uint64
	timedOut   atomic.Uint64
	canceled   atomic.Uint64
	failed     atomic.Uint64
	reconnects atomic.Uint64
	batches    atomic.Uint64
	bytesRaw   atomic.Uint64
	bytesWire  atomic.Uint64
}

// Stats is a snapshot of a Producer's counters.
type Stats struct {
	Pending      int    // messages enqueued and not yet released (callback not yet run), every topic
	PendingBytes int64  // their bytes: payload plus metadata, as MaxPendingBytes counts them
	Topics       int    // topics the producer holds state for (see TopicIdleTimeout)
	Unacked      int    // messages written to a connection and not yet resolved (no receipt, no failure)
	Sent         uint64 // messages written to a connection, resends included
	Acked        uint64 // success outcomes (Send's too), counted as the callback goroutine takes them up, in runs of up to 64 just before their callbacks
	TimedOut     uint64 // callbacks of messages whose SendTimeout elapsed (ErrTimeout)
	Canceled     uint64 // callbacks of messages whose context ended (canceled, or its deadline: ErrTimeout too)
	Failed       uint64 // ErrClosed, ErrMessageTooLarge, ErrFenced and refusal outcomes
	Reconnects   uint64 // connections established after the first
	Batches      uint64 // BATCH frames written
	BytesRaw     uint64 // BATCH frame bytes before compression
	BytesWire    uint64 // BATCH frame bytes as written
}

// Stats returns the producer's counters. It is safe for concurrent use;
// the fields are read one by one, so they are not a single consistent
// instant. It costs atomic loads, and for Unacked a read of the state of
// each message written and not yet acknowledged (a few ns each: a window
// of 4 frames of 4096 messages, about 0.1 ms; while the broker is away,
// every message written before it went).
func (p *Producer) Stats() Stats {
	unacked, pending, pendingBytes := 0, 0, int64(0)
	for _, l := range p.lanesSnapshot() {
		unacked += l.led.unackedNow()
		n, bytes := l.led.pending()
		pending, pendingBytes = pending+n, pendingBytes+bytes
	}
	return Stats{
		Pending:      pending,
		PendingBytes: pendingBytes,
		Topics:       int(p.topics.Load()),
		Unacked:      unacked,
		Sent:         p.stats.sent.Load(),
		Acked:        p.stats.acked.Load(),
		TimedOut:     p.stats.timedOut.Load(),
		Canceled:     p.stats.canceled.Load(),
		Failed:       p.stats.failed.Load(),
		Reconnects:   p.stats.reconnects.Load(),
		Batches:      p.stats.batches.Load(),
		BytesRaw:     p.stats.bytesRaw.Load(),
		BytesWire:    p.stats.bytesWire.Load(),
	}
}

// MessagesPerBatch returns the average number of messages in a BATCH frame
// (resends included), or 0 before the first batch.
func (s Stats) MessagesPerBatch() float64 {
	if s.Batches == 0 {
		return 0
	}
	return float64(s.Sent) / float64(s.Batches)
}

// CompressionRatio returns BytesRaw / BytesWire (1 without compression, or
// before the first batch).
func (s Stats) CompressionRatio() float64 {
	if s.BytesWire == 0 {
		return 1
	}
	return float64(s.BytesRaw) / float64(s.BytesWire)
}
