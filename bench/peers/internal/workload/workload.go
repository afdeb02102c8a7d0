// Package workload holds what the peer benchmarks and the plot program
// share about the messages they send.
package workload

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Payload returns size pseudo-random bytes, the same for the same size:
// incompressible, and no client measured here compresses anyway.
func Payload(size int) []byte {
	r := rand.New(rand.NewPCG(uint64(size), 7))
	p := make([]byte, size)
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	return p
}

// ParseSizes parses a comma-separated list of positive payload sizes in
// bytes, such as "100,1024,16384".
func ParseSizes(s string) ([]int, error) {
	var sizes []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad payload size %q: want a positive number of bytes", f)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}
