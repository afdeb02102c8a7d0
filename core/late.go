package core

import (
	"container/heap"
	"sync"
)

// lateQueue holds the deadlines of messages that entered the ring late:
// after waiting for room, their deadline (fixed when SendAsync was called)
// can be earlier than those of messages ahead of them, which the sweeper's
// in-order scan would not reach in time. The sweeper pops them by the time
// to look at them again. Only senders that had to wait, and the sweeper,
// touch it.
type lateQueue struct {
	mu sync.Mutex
	h  lateHeap
}

type lateEntry struct {
	at       int64 // when to look at it: its deadline, or its true expiry once known
	deadline int64 // the slot's deadline
	pos      uint64
}

type lateHeap []lateEntry

func (h lateHeap) Len() int           { return len(h) }
func (h lateHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h lateHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *lateHeap) Push(x any)        { *h = append(*h, x.(lateEntry)) }
func (h *lateHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func (q *lateQueue) push(pos uint64, deadline int64) { q.pushAt(pos, deadline, deadline) }

func (q *lateQueue) pushAt(pos uint64, deadline, at int64) {
	q.mu.Lock()
	heap.Push(&q.h, lateEntry{at: at, deadline: deadline, pos: pos})
	q.mu.Unlock()
}

// due removes the entries to look at by now, appends them to dst, and
// returns it with the earliest time left (0: none). A position may since
// have been resolved or recycled; the caller's stamped CAS makes that
// harmless.
func (q *lateQueue) due(now int64, dst []lateEntry) ([]lateEntry, int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.h) > 0 && q.h[0].at <= now {
		dst = append(dst, heap.Pop(&q.h).(lateEntry))
	}
	if len(q.h) == 0 {
		return dst, 0
	}
	return dst, q.h[0].at
}

// empty reports whether the queue holds nothing.
func (q *lateQueue) empty() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.h) == 0
}
