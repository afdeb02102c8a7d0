package ringbuf

import (
	"fmt"
	"sync"
	"testing"
)

// BenchmarkQueue compares the ring used as an MPSC queue with a buffered
// channel of the same capacity, for 1, 2 and 8 producers and one consumer.
// One op is one item pushed and popped. The ring's consumer drains in
// batches (one release per batch); a channel has no batch receive.
func BenchmarkQueue(b *testing.B) {
	const capacity = 1024
	for _, producers := range []int{1, 2, 8} {
		b.Run(fmt.Sprintf("ring/%dP1C", producers), func(b *testing.B) {
			r, _ := New[uint64](capacity, 1<<40)
			runQueueBench(b, producers,
				func(v uint64) {
					pos, err := r.Claim(0, nil)
					if err != nil {
						panic(err)
					}
					r.Slot(pos).Value = v
					r.Publish(pos)
				},
				func(n int) {
					buf := make([]uint64, 0, 256)
					for got := 0; got < n; {
						buf, _ = r.Drain(buf[:0], 256, nil)
						got += len(buf)
					}
				})
		})
		b.Run(fmt.Sprintf("chan/%dP1C", producers), func(b *testing.B) {
			ch := make(chan uint64, capacity)
			runQueueBench(b, producers,
				func(v uint64) { ch <- v },
				func(n int) {
					for range n {
						<-ch
					}
				})
		})
	}
}

func runQueueBench(b *testing.B, producers int, push func(uint64), consume func(n int)) {
	b.ReportAllocs()
	per := b.N / producers
	if per == 0 {
		per = 1
	}
	total := per * producers
	b.ResetTimer()
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range per {
				push(uint64(p*per + i))
			}
		})
	}
	consume(total)
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "msgs/s")
}
