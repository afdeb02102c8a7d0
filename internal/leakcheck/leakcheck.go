// Package leakcheck holds the goleak options shared by the test packages
// that start gnet, whose global goroutine pool (ants) keeps idle workers
// and a ticker for the life of the process, and by those that run
// nats-server in process (NATSOptions): goroutines that are not ours to
// stop.
package leakcheck

import "go.uber.org/goleak"

// Options are the goleak options for packages that use gnet.
func Options() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"),
		goleak.IgnoreAnyFunction("github.com/panjf2000/ants/v2.(*goWorker).run.func1"),
	}
}

// NATSOptions are Options and, for packages that run nats-server in
// process, its access-time service (server/ats): one goroutine per
// process, stopped when the last file store any server opened is stopped.
// Once in about ten runs of cmd/inflight's tests under -race, its count
// stayed above zero after every server had shut down and every other
// goroutine of theirs had stopped, so it outlived them. It is
// nats-server's to stop, through a count of its own; any other goroutine a
// server leaves running is still reported.
func NATSOptions() []goleak.Option {
	return append(Options(), goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server/ats.Register.func1"))
}
