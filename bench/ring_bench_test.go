package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/smallnest/chanx"

	"github.com/inflightmq/inflight/ringbuf"
)

// BenchmarkRing compares the ring used as an MPSC queue with a buffered
// channel and with chanx.UnboundedChan, in the same run: 1, 2 and 8
// producers, one consumer. One op is one item pushed and popped. The ring is
// count-limited (zero-byte claims, like a channel); its consumer drains in
// batches, one release per batch. ring claims one position per item;
// ring-claimN claims runs of up to 64 (ClaimN, PublishN), as a sender with
// several messages does (core.Producer.SendBatch).
func BenchmarkRing(b *testing.B) {
	const capacity = 4096
	for _, producers := range []int{1, 2, 8} {
		b.Run(fmt.Sprintf("%dP1C/ring", producers), func(b *testing.B) {
			r, _ := ringbuf.New[uint64](capacity, 1)
			queueBench(b, producers,
				func(v uint64) {
					pos, err := r.Claim(0, nil)
					if err != nil {
						panic(err)
					}
					r.Slot(pos).Value = v
					r.Publish(pos)
				},
				func(n int) {
					buf := make([]uint64, 0, 512)
					for got := 0; got < n; {
						buf, _ = r.Drain(buf[:0], 512, nil)
						got += len(buf)
					}
				})
		})
		// The same ring with each producer claiming and publishing runs
		// of up to ringRun items at once (ClaimN, PublishN): one CAS on
		// tail per run instead of per item.
		b.Run(fmt.Sprintf("%dP1C/ring-claimN", producers), func(b *testing.B) {
			r, _ := ringbuf.New[uint64](capacity, 1)
			queueBatchBench(b, producers, r)
		})
		b.Run(fmt.Sprintf("%dP1C/chan", producers), func(b *testing.B) {
			ch := make(chan uint64, capacity)
			queueBench(b, producers, func(v uint64) { ch <- v }, func(n int) {
				for range n {
					<-ch
				}
			})
		})
		b.Run(fmt.Sprintf("%dP1C/chanx", producers), func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ch := chanx.NewUnboundedChan[uint64](ctx, capacity)
			queueBench(b, producers, func(v uint64) { ch.In <- v }, func(n int) {
				for range n {
					<-ch.Out
				}
			})
			close(ch.In)
			for range ch.Out { // let its goroutine finish
			}
		})
	}
}

// ringRun is how many items a producer claims at once in ring-claimN.
const ringRun = 64

// queueBatchBench is queueBench for producers that claim runs of items
// (ClaimN, PublishN) and a consumer that drains the ring.
func queueBatchBench(b *testing.B, producers int, r *ringbuf.Ring[uint64]) {
	runQueueBench(b, producers,
		func(p, per int) {
			var sizes [ringRun]int64 // zero bytes: limited by count, like a channel
			for i := 0; i < per; {
				first, n, err := r.ClaimN(sizes[:min(ringRun, per-i)], nil)
				if err != nil {
					panic(err)
				}
				for j := range n {
					r.Slot(first + uint64(j)).Value = uint64(p*per + i + j)
				}
				r.PublishN(first, n)
				i += n
			}
		},
		func(total int) {
			buf := make([]uint64, 0, 512)
			for got := 0; got < total; {
				buf, _ = r.Drain(buf[:0], 512, nil)
				got += len(buf)
			}
		})
}

// queueBench runs producers pushing b.N items in total, one at a time, and
// one consumer.
func queueBench(b *testing.B, producers int, push func(uint64), consume func(n int)) {
	runQueueBench(b, producers, func(p, per int) {
		for i := range per {
			push(uint64(p*per + i))
		}
	}, consume)
}

// runQueueBench runs producers, producer p calling produce(p, per) to push
// its per items, and consume for all of them on the benchmark's goroutine,
// and reports msgs/s.
func runQueueBench(b *testing.B, producers int, produce func(p, per int), consume func(n int)) {
	b.ReportAllocs()
	per := max(b.N/producers, 1)
	total := per * producers
	b.ResetTimer()
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() { produce(p, per) })
	}
	consume(total)
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "msgs/s")
}
