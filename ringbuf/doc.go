// Package ringbuf is the lock-free pending queue at the heart of inflight: a
// bounded multi-producer ring whose slots carry a value, a deadline and a
// state that changes by compare-and-swap.
//
// Positions grow forever (uint64); a position p lives in slot p&mask. Two
// cursors bound the live region:
//
//	            head                                   tail
//	             v                                      v
//	... | done | acked | written | writing | pending | (claimed) | free ...
//	     <------------- live: tail-head <= limit ---------------->
//
// Many goroutines claim positions at the tail (CAS on tail; TryClaimN takes a
// run of consecutive positions with one), fill the slot's value and
// deadline, and publish it by storing the slot's state word. One
// consumer side (in inflight: the pump, the resolver, the sweeper and the
// dispatcher, each with its own cursor between head and tail) moves slots
// through their states and finally releases them by advancing head, which
// frees room for producers.
//
// Every state word is stamped with the position it belongs to ((pos+1)<<4 |
// state; the +1 makes a fresh, zero slot match no position), so a compare-and-swap aimed at position p can never change the slot
// after it was recycled for p+capacity, and a reader can tell a published slot
// from a stale one. This is the "sequence stamp" of go-diodes and the
// disruptor, folded into the state word.
//
// The ring also accounts bytes: each claim reserves a size against a byte
// limit, and release returns it. Claim blocks (briefly spinning, then
// parking) while either limit is reached; TryClaim fails fast with ErrFull.
// Close wakes every waiter with ErrClosed.
//
// Cursors are padded to separate cache lines; slots are allocated by page
// of 16 as claims first reach them, and a ring that holds few positions
// reuses its released pages (see Ring.Release); no operation allocates in
// steady state (a Claim that has to park allocates a wake-up channel
// shared by all waiters, once per wake-up).
package ringbuf
