package ringbuf

// Drain uses the ring as a plain MPSC queue: the consumer takes published
// values in position order and releases them at once, ignoring states.
// inflight's producer does not use it (its consumer side resolves slots
// before releasing them); it serves the ring's benchmarks (bench/) and
// tests.

// Drain waits for the value at head, then removes up to max consecutive
// published values, appends them to dst and returns it. Releasing once per
// batch instead of once per value is what makes a batch consumer cheap. It
// returns ErrClosed once the ring is closed and empty, ErrCanceled if done
// is closed first. Consumer only.
func (r *Ring[T]) Drain(dst []T, max int, done <-chan struct{}) ([]T, error) {
	h := r.head.Load()
	if err := r.WaitPublishedUntil(h, done, nil); err != nil {
		return dst, err
	}
	p := h
	for n := 0; n < max && r.Published(p); n++ {
		dst = append(dst, r.slot(p).Value)
		p++
	}
	r.Release(p)
	return dst, nil
}
