// Package cpuclock reads the CPU time the process has used, for
// benchmarks that report CPU per message beside throughput: on a host
// whose speed varies from one run to the next, the CPU a message costs
// moves less than the rate, and it is what an optimization changes.
package cpuclock
