package core

import "runtime"

// PumpPasses returns how many passes the pump made over its work: a test
// of its wake-ups counts them.
func PumpPasses(p *Producer) uint64 { return p.pumpPasses.Load() }

// OnLanesFreed makes freed run once for each lane p has now, but its
// first topic's, when the garbage collector frees the lane's ring, and
// returns how many it watches.
func OnLanesFreed(p *Producer, freed func()) int {
	n := 0
	for _, l := range p.lanesSnapshot() {
		if l != p.def {
			runtime.AddCleanup(l.led.ring, func(f func()) { f() }, freed)
			n++
		}
	}
	return n
}
