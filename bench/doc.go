// Package bench holds inflight's benchmarks: make bench, or for a subset
// go test -run=NONE -bench=Ring ./bench/.
// Side-by-side runs against other messaging clients live in bench/peers, a
// separate module, so that the library's go.mod stays small.
package bench
