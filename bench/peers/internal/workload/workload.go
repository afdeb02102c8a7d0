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

// Payloads returns n distinct payloads of size pseudo-random bytes, the
// same for the same size and n; the first is Payload(size).
func Payloads(size, n int) [][]byte {
	out := make([][]byte, n)
	out[0] = Payload(size)
	r := rand.New(rand.NewPCG(uint64(size), 8))
	for i := 1; i < n; i++ {
		p := make([]byte, size)
		for j := 0; j < size; j += 8 {
			x := r.Uint64()
			for k := j; k < min(j+8, size); k++ {
				p[k] = byte(x)
				x >>= 8
			}
		}
		out[i] = p
	}
	return out
}

// DistinctBytes is how many bytes of payloads a run with distinct payloads
// sends in turn (see PoolSize).
const DistinctBytes = 64 << 20

// PoolSize is how many distinct payloads of size bytes a run sends in turn:
// DistinctBytes of them, at least 1024 and at most 1 << 20, so that by its
// turn a payload has left the CPU's caches, as the payloads of a producer
// far ahead of its broker have.
func PoolSize(size int) int { return min(max(DistinctBytes/size, 1024), 1<<20) }

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
