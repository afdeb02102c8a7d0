package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
)

// count formats n with thousands separators: 12,772,671.
func count[T ~int | ~int64 | ~uint64](n T) string {
	return humanize.Comma(int64(max(n, 0)))
}

// rate formats a per-second rate to three significant digits with an SI
// prefix: 3.19M/s, 95.9k/s, 812k/s, 40/s.
func rate(perSec float64) string {
	v, prefix := humanize.ComputeSI(max(perSec, 0))
	digits := 2
	switch {
	case prefix == "" || v >= 100:
		digits = 0
	case v >= 10:
		digits = 1
	}
	return strconv.FormatFloat(v, 'f', digits, 64) + prefix + "/s"
}

// bytesRate formats bytes per second: 319 MB/s.
func bytesRate(perSec float64) string {
	return humanize.Bytes(uint64(max(perSec, 0))) + "/s"
}

// roundDuration formats d to about two significant digits (the latency
// histogram's buckets are 3% wide; more digits would be noise): 33ms, 1.2ms,
// 180µs, 4.5s.
func roundDuration(d time.Duration) string {
	if d <= 0 {
		return "0"
	}
	unit, name := time.Duration(1), "ns"
	switch {
	case d >= time.Second:
		unit, name = time.Second, "s"
	case d >= time.Millisecond:
		unit, name = time.Millisecond, "ms"
	case d >= time.Microsecond:
		unit, name = time.Microsecond, "µs"
	}
	v := float64(d) / float64(unit)
	if v >= 10 {
		return fmt.Sprintf("%.0f%s", v, name)
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", v), ".0") + name
}
