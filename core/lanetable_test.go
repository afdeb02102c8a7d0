package core

import (
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/wire"
)

// TestLaneTable adds, finds and removes lanes through growth, tombstones
// and shrinking, against a plain map.
func TestLaneTable(t *testing.T) {
	tab := newLaneTable(minLaneSlots, maphash.MakeSeed())
	want := map[string]*lane{}
	check := func(stage string) {
		t.Helper()
		for name, l := range want {
			require.Same(t, l, tab.get(name), "%s: %s", stage, name)
		}
		assert.Nil(t, tab.get("absent"), stage)
		assert.Equal(t, len(want), tab.live, stage)
		assert.LessOrEqual(t, tab.used*4, len(tab.slots)*3, stage)
	}
	for i := range 1000 {
		l := &lane{topic: fmt.Sprintf("t%d", i)}
		tab = tab.put(l)
		want[l.topic] = l
	}
	check("grown")
	grown := len(tab.slots)
	for i := range 990 {
		name := fmt.Sprintf("t%d", i)
		tab = tab.del(want[name])
		delete(want, name)
		tab = tab.del(&lane{topic: name}) // not in the table: nothing happens
	}
	check("emptied")
	assert.Less(t, len(tab.slots), grown, "a mostly forgotten table shrinks")
	// Churn on few live lanes: tombstones are swept by rebuilds, and the
	// table shrinks once it is mostly empty.
	for i := range 5000 {
		l := &lane{topic: fmt.Sprintf("c%d", i)}
		tab = tab.put(l)
		want[l.topic] = l
		if i > 0 {
			old := want[fmt.Sprintf("c%d", i-1)]
			tab = tab.del(old)
			delete(want, old.topic)
		}
	}
	check("churned")
	assert.LessOrEqual(t, len(tab.slots), 64, "churn on few lanes keeps the table small")
}

// TestLaneTableConcurrentReaders: readers of a published table find every
// lane that was in it before they loaded it and not removed, while the
// writer adds, removes and rebuilds (run with -race).
func TestLaneTableConcurrentReaders(t *testing.T) {
	var cur atomic.Pointer[laneTable]
	cur.Store(newLaneTable(minLaneSlots, maphash.MakeSeed()))
	stable := make([]*lane, 50)
	for i := range stable {
		stable[i] = &lane{topic: fmt.Sprintf("s%d", i)}
		cur.Store(cur.Load().put(stable[i]))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				tab := cur.Load()
				for _, l := range stable {
					if tab.get(l.topic) != l {
						t.Errorf("%s not found", l.topic)
						return
					}
				}
			}
		})
	}
	for i := range 20000 {
		l := &lane{topic: fmt.Sprintf("x%d", i)}
		cur.Store(cur.Load().put(l))
		if i%3 != 0 {
			cur.Store(cur.Load().del(l))
		}
	}
	close(stop)
	wg.Wait()
}

// TestFullWeight: a frame closed by the byte limit takes its size's share
// of 2 MiB of a place in its lane's window, rounded up, at least 1/16 and
// at most half.
func TestFullWeight(t *testing.T) {
	for size, want := range map[int]int{
		1:                    1,
		wire.MinMaxFrameSize: 1,
		128 << 10:            1,
		128<<10 + 1:          2,
		200 << 10:            2,
		256 << 10:            2,
		512 << 10:            4,
		1<<20 - 1:            8,
		1 << 20:              8, // the default MaxBatchBytes: half a place, as before
		2 << 20:              8,
		1 << 30:              8,
	} {
		if got := fullWeight(size); got != want {
			t.Errorf("fullWeight(%d) = %d units, want %d of %d", size, got, want, frameUnits)
		}
	}
}
