package main

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/inflightmq/inflight/metrics/hist"
)

// TestLatencyBars: one bar per 1-2-5 step from the fastest to the slowest
// row, the longest bar full width, rounded quantiles, and no zeros when
// nothing succeeded.
func TestLatencyBars(t *testing.T) {
	var out strings.Builder
	printLatency(&out, &hist.Histogram{})
	assert.Equal(t, "latency: no message succeeded, so there is none to show\n", out.String())

	var h hist.Histogram
	for range 900 {
		h.Record(150 * time.Microsecond)
	}
	for range 99 {
		h.Record(3 * time.Millisecond)
	}
	h.Record(40 * time.Millisecond)
	out.Reset()
	printLatency(&out, &h)
	t.Log("\n" + out.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	assert.Equal(t, "latency, send to callback, of 1,000 successes:", lines[0])
	assert.Len(t, lines, 1+8+1, "rows 200µs..50ms and the quantiles")
	assert.Contains(t, lines[1], "≤  200µs  "+strings.Repeat("█", barWidth)+"  90.0%")
	assert.Contains(t, lines[5], "≤    5ms  ████▍")
	assert.Contains(t, lines[8], "≤   50ms  ▏")
	assert.Equal(t, "  p50 151µs  p90 152µs  p99 3ms  p99.9 3ms  max 40ms", lines[9])
}

// TestLatencyRowsEnd: the rows end for any duration, the largest included.
func TestLatencyRowsEnd(t *testing.T) {
	var h hist.Histogram
	h.Record(time.Nanosecond)
	h.Record(math.MaxInt64)
	rows := latencyRows(&h)
	assert.Equal(t, time.Microsecond, rows[0].upTo)
	assert.Equal(t, time.Duration(math.MaxInt64), rows[len(rows)-1].upTo)
	assert.Equal(t, uint64(1), rows[len(rows)-1].n)
}
