package core

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/inflightmq/inflight/ringbuf"
	"github.com/inflightmq/inflight/wire"
)

// BenchmarkLedger runs one message's whole life through the ledger on one
// goroutine, without a transport: claimed and published (one by one, or
// in runs of 64 as SendBatch does), built into a batch, acknowledged, and
// walked by the dispatcher, in rounds of 1024 messages, in a flat ring (a
// producer's first topics) and a paged one (its later topics). One op is
// one message; it measures the ledger's own cost (atomics and copies),
// free of the scheduling noise of the end-to-end benchmarks: on the shared
// 2-vCPU host its runs agree within 1%, where SendAsync's spread by 10%.
func BenchmarkLedger(b *testing.B) {
	const round, size = 1024, 100
	for _, flat := range []bool{true, false} {
		for _, run := range []int{1, 64} {
			b.Run(fmt.Sprintf("flat=%v/run=%d", flat, run), func(b *testing.B) {
				benchLedger(b, flat, run, round, size)
			})
		}
	}
}

// benchLedger is one BenchmarkLedger case: a flat or paged ring, claims
// of run messages, rounds of round messages of size bytes.
func benchLedger(b *testing.B, flat bool, run, round int, size int64) {
	b.Helper()
	l, _, err := newTestLedger(4*round, 1<<30, int64Max, nil, flat)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := l.handshake(0, true); err != nil {
		b.Fatal(err)
	}
	l.exemptFrom() // as a producer's first topic is, while it is its only one
	msgs := make([]*Message, round)
	for i := range msgs {
		msgs[i] = &Message{Payload: make([]byte, size)}
	}
	cb := func(MessageID, *Message, error) {}
	sizes := make([]int64, run)
	for i := range sizes {
		sizes[i] = size
	}
	var bb wire.BatchBuilder
	lim := batchLimits{messages: round, bytes: 1 << 20, frame: wire.DefaultMaxFrameSize, end: math.MaxUint64, sum: true}
	var pos, next uint64
	deliver := func(uint64, ringbuf.State) {}
	ctx := context.Background()
	b.SetBytes(size)
	b.ReportAllocs()
	for i := 0; i < b.N; i += round {
		for j := 0; j < round; {
			first, n, _, err := l.claim(ctx, sizes[:min(run, round-j)], 1<<62, false, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			l.publish(first, msgs[j:j+n], cb, nil, 1<<62, nil)
			j += n
		}
		end := pos + uint64(round)
		for pos < end {
			var n int
			if pos, n, _ = l.nextBatch(&bb, pos, lim, 0); n == 0 {
				b.Fatal("empty batch")
			}
			bb.Take(nil, bb.Bytes())
		}
		l.ackThrough(l.seq(end - 1))
		l.walk(&next, deliver)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

const int64Max = 1<<63 - 1
