package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/inflightmq/inflight/metrics/hist"
)

// barWidth is the length, in terminal cells, of the longest bar.
const barWidth = 40

// eighths are the partial blocks that end a bar: 1/8 to 7/8 of a cell.
var eighths = []rune("▏▎▍▌▋▊▉")

// latencyRow is one bar: the durations in (previous row's upTo, upTo].
type latencyRow struct {
	upTo time.Duration
	n    uint64
}

// printLatency draws h (send-to-callback latencies of the successes) as a
// bar per 1-2-5 step, from the fastest row to the slowest, then the
// quantiles to two significant digits. With nothing recorded it says so
// rather than print zeros.
func printLatency(w io.Writer, h *hist.Histogram) {
	if h.Count() == 0 {
		fmt.Fprintln(w, "latency: no message succeeded, so there is none to show")
		return
	}
	rows := latencyRows(h)
	var most uint64
	for _, r := range rows {
		most = max(most, r.n)
	}
	fmt.Fprintf(w, "latency, send to callback, of %s successes:\n", count(h.Count()))
	for _, r := range rows {
		share := float64(r.n) / float64(h.Count())
		fmt.Fprintf(w, "  ≤ %6s  %-*s %5.1f%%\n", roundDuration(r.upTo), barWidth, bar(r.n, most), 100*share)
	}
	fmt.Fprintf(w, "  p50 %s  p90 %s  p99 %s  p99.9 %s  max %s\n",
		roundDuration(quantile(h, 0.5)), roundDuration(quantile(h, 0.9)), roundDuration(quantile(h, 0.99)),
		roundDuration(quantile(h, 0.999)), roundDuration(h.Max()))
}

// quantile estimates the q-quantile by interpolating within the bucket that
// holds it, so that two quantiles in one 3%-wide bucket (p99 and p99.9 of a
// tight distribution) are not both printed as the bucket's lower edge.
func quantile(h *hist.Histogram, q float64) time.Duration {
	lo, prev := h.Min(), 0.0
	var out time.Duration
	found := false
	h.Each(func(upTo time.Duration, fraction float64) {
		if found {
			return
		}
		if fraction >= q {
			// The bucket starts at Quantile's answer (its lower edge), or
			// after the previous non-empty bucket if rank rounding differs.
			if b := h.Quantile(q); b > lo && b <= upTo {
				lo = b
			}
			out = lo + time.Duration(float64(upTo-lo)*(q-prev)/(fraction-prev))
			found = true
			return
		}
		lo, prev = upTo, fraction
	})
	if !found {
		return h.Max()
	}
	return min(max(out, h.Min()), h.Max())
}

// latencyRows groups the histogram's buckets into rows whose upper edges
// follow 1, 2, 5, 10, 20, 50... microseconds, from the row of the smallest
// duration to the row of the largest.
func latencyRows(h *hist.Histogram) []latencyRow {
	var rows []latencyRow
	edge := edges()
	var prev float64
	h.Each(func(upTo time.Duration, fraction float64) {
		n := uint64(float64(h.Count())*fraction+0.5) - uint64(float64(h.Count())*prev+0.5)
		prev = fraction
		for len(rows) == 0 || rows[len(rows)-1].upTo < upTo {
			up := edge()
			if up < upTo && len(rows) == 0 {
				continue // below the first non-empty row
			}
			rows = append(rows, latencyRow{upTo: up})
		}
		rows[len(rows)-1].n += n
	})
	return rows
}

// edges returns a generator of 1-2-5 durations from 1µs up, ending at the
// largest Duration (so every duration has a row).
func edges() func() time.Duration {
	steps := [...]time.Duration{1, 2, 5}
	i, scale := 0, time.Microsecond
	return func() time.Duration {
		if scale > math.MaxInt64/50 {
			return math.MaxInt64
		}
		d := steps[i] * scale
		if i++; i == len(steps) {
			i, scale = 0, scale*10
		}
		return d
	}
}

// bar draws n against most in barWidth cells, with a partial block for the
// rest; a non-empty row gets at least a sliver.
func bar(n, most uint64) string {
	if n == 0 {
		return ""
	}
	e := max(int(n*barWidth*8/most), 1) // in eighths of a cell
	s := strings.Repeat("█", e/8)
	if e%8 != 0 {
		s += string(eighths[e%8-1])
	}
	return s
}
