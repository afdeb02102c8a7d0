package core

import "runtime"

// PumpPasses returns how many passes the pump made over its work: a test
// of its wake-ups counts them.
func PumpPasses(p *Producer) uint64 { return p.pumpPasses.Load() }

// PumpYields returns how many times the pump yielded before parking.
func PumpYields(p *Producer) uint64 { return p.pumpYields.Load() }

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

// FlatRing reports whether topic's lane's ring is flat, and whether p has
// a lane for topic.
func FlatRing(p *Producer, topic string) (flat, ok bool) {
	l := p.lanes.Load().get(topic)
	if l == nil {
		if p.def.topic != topic {
			return false, false
		}
		l = p.def
	}
	return l.led.ring.Flat(), true
}
