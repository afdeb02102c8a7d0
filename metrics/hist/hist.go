// Package hist is a small log-linear latency histogram: constant memory,
// allocation-free recording, quantiles within 1/32 (about 3%) of the true
// value. It serves the inflight command's latency report and the benchmarks;
// a program can measure its own send-to-callback latency with it.
package hist

import (
	"math/bits"
	"time"
)

// subBits sub-buckets per power of two: relative error at most 2^-subBits.
const subBits = 5

const (
	sub     = 1 << subBits
	buckets = (64 - subBits + 1) * sub
)

// Histogram counts durations. The zero value is ready to use. It is not
// safe for concurrent use.
type Histogram struct {
	counts   [buckets]uint64
	n        uint64
	min, max time.Duration
}

// index maps v to its bucket: values below sub are exact; above, a bucket
// covers 1/sub of a power of two.
func index(v uint64) int {
	if v < sub {
		return int(v)
	}
	exp := bits.Len64(v) - 1 - subBits // >= 0
	return (exp+1)*sub + int(v>>uint(exp)) - sub
}

// lower returns the smallest value of bucket i.
func lower(i int) uint64 {
	if i < sub {
		return uint64(i)
	}
	exp := i/sub - 1
	return uint64(i%sub+sub) << uint(exp)
}

// Record adds one duration (negative counts as 0).
func (h *Histogram) Record(d time.Duration) {
	d = max(d, 0)
	h.counts[index(uint64(d))]++
	if h.n == 0 || d < h.min {
		h.min = d
	}
	h.n++
	h.max = max(h.max, d)
}

// Count returns the number of recorded durations.
func (h *Histogram) Count() uint64 { return h.n }

// Min returns the smallest recorded duration (negative ones count as 0).
func (h *Histogram) Min() time.Duration { return h.min }

// Max returns the largest recorded duration.
func (h *Histogram) Max() time.Duration { return h.max }

// Each calls fn for every non-empty bucket in increasing order with the
// bucket's largest value (kept within [Min, Max]) and the fraction of all
// recorded durations at or below that bucket: the points of the CDF.
func (h *Histogram) Each(fn func(upTo time.Duration, fraction float64)) {
	var seen uint64
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		seen += c
		upTo := h.max
		if i+1 < buckets {
			upTo = min(max(time.Duration(lower(i+1)-1), h.min), h.max)
		}
		fn(upTo, float64(seen)/float64(h.n))
	}
}

// Quantile returns the duration below which a fraction q (0..1) of the
// recorded durations fall, or 0 if none were recorded.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q * float64(h.n))
	if rank >= h.n {
		rank = h.n - 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen > rank {
			return min(time.Duration(lower(i)), h.max)
		}
	}
	return h.max
}

// Merge adds the counts of o into h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}
