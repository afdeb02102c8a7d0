// Package peers runs inflight side by side with other asynchronous producers
// in one process, on loopback, under the same workload: one goroutine sends
// messages as fast as the client accepts them and every acknowledgement is
// awaited. It is a separate module so that the library's go.mod never
// depends on the peers (NATS JetStream, franz-go with kfake, gonum/plot).
//
//	make bench-peers    # from the repository root: text and a Markdown table in bench-out/
//	go test -run=NONE -bench=Peers -benchtime=200000x .
//
// Flags: -peers.sizes (payload sizes), -peers.rate (a paced sender),
// -peers.sample (which messages are timed), -peers.distinct (64 MiB of
// distinct payloads sent in turn, out of the CPU's caches by their turn,
// rather than one payload over and over), -peers.batchbytes and
// -peers.batchmessages (inflight's MaxBatchBytes and MaxBatchMessages).
//
// Everything lives in the _test.go files and in cmd/; this file only names
// the package.
package peers
