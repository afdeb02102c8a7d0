// Package leakcheck holds the goleak options shared by the test packages
// that start gnet: gnet's global goroutine pool (ants) keeps idle workers
// and a ticker for the life of the process; they are not ours to stop.
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
