package ringbuf

import "runtime"

// Batch claims: one compare-and-swap on tail, and one on the byte counter,
// for a run of positions instead of one of each per position. With several
// producers those two counters are the contended cache lines; a producer
// that claims n positions at once meets the others n times less often.
//
//	before:  ... | p | p |(c)|            tail = 7
//	TryClaimN(sizes[:3])  -> first 7, n 3
//	after:   ... | p | p |(c)|(c)|(c)|(c)|  tail = 10
//
// The claimed run is consecutive: no other producer's position falls
// inside it.

// TryClaimN reserves, without waiting, consecutive positions for the items
// whose sizes are given, sizes[i] bytes for the i-th: as many as the count
// and byte limits admit, in order, so what it claims is always a prefix of
// sizes. It returns the first position and how many it claimed (at least
// one), ErrFull when not even sizes[0] fits, ErrClosed after Close, and
// ErrInvalidSize for an empty sizes or a negative size (then nothing is
// claimed). The byte limit applies to the sum as TryClaim applies it to one
// size: the first item is admitted into an empty ring whatever its size.
//
// The caller owns the claimed slots' Values until it publishes them, and
// must publish every position it claims (Publish or PublishN). TryClaimN
// does not keep sizes.
func (r *Ring[T]) TryClaimN(sizes []int64) (uint64, int, error) {
	if len(sizes) == 0 {
		return 0, 0, ErrInvalidSize
	}
	for _, s := range sizes {
		if s < 0 {
			return 0, 0, ErrInvalidSize
		}
	}
	k := 0         // items whose bytes are reserved: sizes[:k]
	var held int64 // their sum
	for {
		t := r.tail.Load()
		if t&closedBit != 0 {
			r.unreserve(held)
			return 0, 0, ErrClosed
		}
		if t&frozenBit != 0 {
			runtime.Gosched() // see Freeze
			continue
		}
		want := uint64(len(sizes))
		if t-r.headCache.Load()+want > r.limit {
			h := r.head.Load()
			if t-h >= r.limit {
				r.unreserve(held)
				return 0, 0, ErrFull
			}
			r.headCache.Store(h)
			want = min(want, r.limit-(t-h))
		}
		switch {
		case k == 0:
			// As in TryClaim, bytes are reserved only once slots are
			// known to be free.
			if k, held = r.reserveN(sizes[:want]); k == 0 {
				return 0, 0, ErrFull
			}
		case uint64(k) > want:
			// Fewer free slots than on the first try: give back the
			// bytes of the items that no longer fit.
			var extra int64
			for _, s := range sizes[want:k] {
				extra += s
			}
			r.unreserve(extra)
			k, held = int(want), held-extra
		}
		if r.tail.CompareAndSwap(t, t+uint64(k)) {
			for i, s := range sizes[:k] {
				r.alloc(t + uint64(i)).size = s
			}
			return t, k, nil
		}
	}
}

// reserveN takes, with one compare-and-swap, the bytes of the longest
// prefix of sizes that fits the byte limit, and returns its length and sum.
// See reserve for why released is read first.
func (r *Ring[T]) reserveN(sizes []int64) (int, int64) {
	for {
		rel := r.released.Load()
		cur := r.claimed.Load()
		inUse := cur - rel
		k, sum := 0, int64(0)
		for _, s := range sizes {
			if u := inUse + sum; u > 0 && u+s > r.maxBytes {
				break
			}
			sum += s
			k++
		}
		if k == 0 || sum == 0 || r.claimed.CompareAndSwap(cur, cur+sum) {
			return k, sum
		}
	}
}

// ClaimN is TryClaimN that waits, as Claim does, until at least one
// position is free: it returns at least one position, or ErrCanceled when
// done is closed first (a nil done waits forever), or ErrClosed when the
// ring closes.
func (r *Ring[T]) ClaimN(sizes []int64, done <-chan struct{}) (uint64, int, error) {
	for i := 0; ; i++ {
		pos, n, err := r.TryClaimN(sizes)
		if err != ErrFull {
			return pos, n, err
		}
		if i < spinTries {
			runtime.Gosched()
			continue
		}
		ch := r.space.arm()
		if pos, n, err = r.TryClaimN(sizes); err != ErrFull {
			r.space.disarm()
			return pos, n, err
		}
		select {
		case <-ch:
			r.space.disarm()
		case <-done:
			r.space.disarm()
			return 0, 0, ErrCanceled
		}
	}
}

// PublishN publishes the n claimed positions from first on, in order, each
// as Publish would, and wakes the consumer once. Every slot's Value and
// deadline must be set before.
func (r *Ring[T]) PublishN(first uint64, n int) {
	pg := r.Pager()
	for pos := first; pos < first+uint64(n); pos++ {
		pg.Peek(pos).state.Store(word(pos, Pending))
	}
	r.consumer.wake()
}
