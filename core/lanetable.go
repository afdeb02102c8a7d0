package core

import (
	"hash/maphash"
	"sync/atomic"
)

// laneTable maps topic names to lanes for laneFor: every SendAsync looks
// its topic up, so reads take no lock, box nothing and touch few cache
// lines: a hash of the name, then one slot, or a few, of a flat array of
// pointers (open addressing, linear probing), the lane found and its
// name. Writes (put, del) are the producer's, under lanesMu.
//
//	slots: | nil | a | gone | b | nil | nil | c | a2 | ...
//	         ^ a lookup of a's topic starts at hash&mask and walks right
//	           until it finds a, or nil (absent); gone (a forgotten
//	           lane's slot) never ends the walk
//
// A table never grows in place: put copies the live lanes into a larger
// (or tidier) one, published with one store, when live and gone slots
// would fill three quarters of it; del into a smaller one when live lanes
// fill less than an eighth. A reader holding the old table may
// miss a lane added since, or find one forgotten since: laneFor then
// makes the lane under lanesMu, which looks in the current table first,
// and a forgotten lane's closed ring sends its sender back to laneFor
// (see retire).
type laneTable struct {
	slots []atomic.Pointer[lane]
	mask  uint64
	seed  maphash.Seed
	live  int // lanes in slots; the writer's
	used  int // live and gone slots; the writer's
}

// gone marks a slot whose lane was forgotten: a lookup walks past it,
// put may fill it again.
var gone = &lane{}

// minLaneSlots is a new table's size.
const minLaneSlots = 16

func newLaneTable(size int, seed maphash.Seed) *laneTable {
	return &laneTable{slots: make([]atomic.Pointer[lane], size), mask: uint64(size - 1), seed: seed}
}

// get returns the lane of topic, or nil. Safe for concurrent use with
// put and del.
func (t *laneTable) get(topic string) *lane {
	for i := maphash.String(t.seed, topic) & t.mask; ; i = (i + 1) & t.mask {
		l := t.slots[i].Load()
		if l == nil {
			return nil
		}
		if l != gone && l.topic == topic {
			return l
		}
	}
}

// put adds l, whose topic is not in t, and returns the table that holds
// it: t, or a new table if t was too full (the caller publishes it). The
// writer's.
func (t *laneTable) put(l *lane) *laneTable {
	if (t.used+1)*4 > len(t.slots)*3 {
		t = t.rebuilt(t.live + 1)
	}
	i := maphash.String(t.seed, l.topic) & t.mask
	for {
		if s := t.slots[i].Load(); s == nil || s == gone {
			if s == nil {
				t.used++
			}
			break
		}
		i = (i + 1) & t.mask
	}
	t.slots[i].Store(l)
	t.live++
	return t
}

// del removes l from t and returns the table that no longer holds it: t,
// or a smaller one once t is mostly empty (the caller publishes it), so
// that a table grown for many topics does not outlive them. The writer's.
func (t *laneTable) del(l *lane) *laneTable {
	for i := maphash.String(t.seed, l.topic) & t.mask; ; i = (i + 1) & t.mask {
		switch t.slots[i].Load() {
		case nil:
			return t
		case l:
			t.slots[i].Store(gone)
			t.live--
			if len(t.slots) > minLaneSlots && 8*t.live < len(t.slots) {
				return t.rebuilt(t.live)
			}
			return t
		}
	}
}

// rebuilt returns a new table holding t's lanes, sized for want of them
// at most half full; not smaller than t while want fills an eighth of t
// (so that a table does not shrink and grow again by turns).
func (t *laneTable) rebuilt(want int) *laneTable {
	size := minLaneSlots
	for size < 2*want {
		size *= 2
	}
	if size < len(t.slots) && 8*want >= len(t.slots) {
		size = len(t.slots)
	}
	n := newLaneTable(size, t.seed)
	for i := range t.slots {
		if l := t.slots[i].Load(); l != nil && l != gone {
			n.put(l)
		}
	}
	return n
}
