package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestNumberFormats(t *testing.T) {
	assert.Equal(t, "12,772,671", count(12772671))
	assert.Equal(t, "0", count(-3))
	for in, want := range map[float64]string{3.19e6: "3.19M/s", 95_873: "95.9k/s", 812_300: "812k/s", 40.4: "40/s", 0: "0/s"} {
		assert.Equal(t, want, rate(in), "%v", in)
	}
	for in, want := range map[time.Duration]string{
		33554432 * time.Nanosecond: "34ms", 1234 * time.Microsecond: "1.2ms", 180 * time.Microsecond: "180µs",
		4500 * time.Millisecond: "4.5s", time.Millisecond: "1ms", 0: "0", 999: "999ns", 536870912: "537ms",
	} {
		assert.Equal(t, want, roundDuration(in), "%v", in)
	}
}
