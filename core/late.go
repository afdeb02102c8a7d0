package core

import (
	"container/heap"
	"sync"
)

// lateQueue holds the deadlines of messages that entered the ring late:
// after waiting for room, their deadline (fixed when SendAsync was called)
// can be earlier than those of messages ahead of them, which the sweeper's
// in-order scan would not reach in time. The sweeper pops them by deadline.
// Only senders that had to wait touch it.
type lateQueue struct {
	mu sync.Mutex
	h  lateHeap
}

type lateEntry struct {
	deadline int64
	pos      uint64
}

type lateHeap []lateEntry

func (h lateHeap) Len() int           { return len(h) }
func (h lateHeap) Less(i, j int) bool { return h[i].deadline < h[j].deadline }
func (h lateHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *lateHeap) Push(x any)        { *h = append(*h, x.(lateEntry)) }
func (h *lateHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func (q *lateQueue) push(pos uint64, deadline int64) {
	q.mu.Lock()
	heap.Push(&q.h, lateEntry{deadline: deadline, pos: pos})
	q.mu.Unlock()
}

// due removes the entries whose deadline is at or before now, appends their
// positions to dst, and returns it with the earliest deadline left (0: none).
// A position may since have been resolved or recycled; the caller's
// stamped CAS makes that harmless.
func (q *lateQueue) due(now int64, dst []uint64) ([]uint64, int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.h) > 0 && q.h[0].deadline <= now {
		dst = append(dst, heap.Pop(&q.h).(lateEntry).pos)
	}
	if len(q.h) == 0 {
		return dst, 0
	}
	return dst, q.h[0].deadline
}
