package core

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/inflightmq/inflight/wire"
)

// lane is one topic of a producer: the ledger of its messages (ring,
// cursors, sequence IDs: order and deduplication are per topic) and what
// the producer's goroutines keep for it. A producer has no goroutine per
// lane: the pump, the dispatcher and the sweeper serve every lane, each
// told which lanes have work through a dirty list (laneList).
//
// A lane with nothing pending costs its structs and the ring pages it
// used (a few KiB; a producer's first two topics, whose rings are flat,
// their blocks: see maxFlatLanes); once idle for TopicIdleTimeout the
// pump forgets it (retire): its ring is closed while empty, the producer drops it, and the
// topic's next message makes a new lane, whose first TOPIC_OK gives it
// sequence IDs after the broker's last one for the topic: a forgotten
// topic never reuses a sequence ID.
type lane struct {
	topic string
	led   *ledger

	pumpQueued atomic.Bool // in the pump's dirty list or work list (see kick)
	// waiting: out of the pump's lists until room in its window or the
	// connection's, with pumpQueued left set, so that senders' kicks do
	// not wake the pump for it (each would, and the pump would find no
	// room: a spin of a wake-up per message); its receipts and releases
	// bring it back (kickRoom).
	waiting    atomic.Bool
	dispQueued atomic.Bool  // in the dispatcher's dirty list
	retired    atomic.Bool  // forgotten: its ring is closed; senders look the topic up again
	lastUsed   atomic.Int64 // producer ns of its last enqueue
	abortErr   atomic.Pointer[error]

	// The pump's: how the lane stands on the current connection.
	conn      *session // the connection its state below is for; nil: none yet
	state     laneState
	id        uint32   // its id on conn
	fresh     bool     // no TOPIC_OK yet in this incarnation: the next sets sequence IDs
	pos       uint64   // next position to write
	endPos    uint64   // first position whose sequence ID would pass wire.MaxSeq
	inFlight  []flight // the frames written and not acknowledged, oldest first
	weight    int      // the sum of inFlight's weights, in units (see flight); fly, land and ground keep both
	counted   int      // its frames counted in conn.flying (see session.flying)
	roomy     bool     // in conn.roomWait
	admitted  bool     // taken from conn.roomWait: a place in conn's window is kept for it (conn.reserved) until its next serve
	inWork    bool     // in the pump's work list
	listed    bool     // in conn.parked
	notBefore int64    // producer ns: not served before (linger, a refused declaration's retry)
	fullAt    int      // records of its last frame a byte bound closed: a full frame's worth (linger, see noteFrame); 0: none
	fullBytes int      // that frame's size
	retries   int      // declarations refused in a row (store trouble)

	// The dispatcher's.
	disp dispatcher
	// The sweeper's: every position below is resolved.
	sweepFrom uint64
}

// flight is a frame of a lane written on its connection and not yet done
// with. A lane's window (MaxFramesInFlight, n) is frameUnits*n units. A
// frame takes frameUnits: the window is there so that a broker that takes
// longer gets bigger frames rather than a deeper queue of small ones. A
// frame a byte bound closed (MaxBatchBytes, the connection's frame limit,
// or cachedFrameBytes for mid-sized records: the next record did not fit)
// cannot grow, and more of them in flight is what keeps the connection
// busy then: it takes the share of fullFramesBytes that the bound, or its
// own size if larger (a message beyond the limit travels alone), has
// (fullWeight). So a lane has at most n frames in flight, or frames closed
// by a byte bound: 2n of 1 MiB (the default) or more, 16n of 128 KiB or
// less, and in between up to 2n MiB of them. (A topic of mid-sized records
// gets more frames of 128 KiB in flight from a slower broker, not bigger
// frames.)
type flight struct {
	end    uint64 // the position after its last record
	weight int    // what it takes of its lane's window, in units
}

// frameUnits is what a frame takes of its lane's window, which is
// frameUnits*MaxFramesInFlight units (see flight).
const frameUnits = 16

// fullFramesBytes is how many bytes of frames closed by a byte bound
// take one frame's place in a lane's window (see fullWeight). At 1 MiB
// frames that is two of them, as it was before frames took their share
// (16 KiB messages on tcp, one topic: 129-139 k msgs/s with n frames of 1
// MiB in flight, 137-153 k with 2n; docs/performance.md, "Seventh
// round"). Keeping the bytes rather than the count is what makes smaller
// frames worth having: one topic of 1 KiB messages on tcp with
// MaxBatchBytes(128 << 10) moved 1.73 M msgs/s with 2n such frames in
// flight, 2.45 M with 2n MiB of them, and 1.89 M at the default 1 MiB
// ("Ninth round").
const fullFramesBytes = 2 << 20

// fullWeight is what a frame of size bytes closed by a byte bound takes
// of its lane's window, in units: size's share of fullFramesBytes rounded
// up, at least one unit and at most half a frame.
func fullWeight(size int) int {
	const unitBytes = fullFramesBytes / frameUnits
	return min(max((size+unitBytes-1)/unitBytes, 1), frameUnits/2)
}

// fly records a frame written on l's connection, which takes weight units
// of its window, and end the position after its last record. The pump's.
func (l *lane) fly(end uint64, weight int) {
	l.inFlight = append(l.inFlight, flight{end: end, weight: weight})
	l.weight += weight
}

// land drops l's frames done with: those that end at or below upto,
// oldest first, and reports whether there were any. The pump's.
func (l *lane) land(upto uint64) bool {
	done, w := 0, 0
	for done < len(l.inFlight) && l.inFlight[done].end <= upto {
		w += l.inFlight[done].weight
		done++
	}
	if done == 0 {
		return false
	}
	l.inFlight = l.inFlight[:copy(l.inFlight, l.inFlight[done:])]
	l.weight -= w
	return true
}

// ground drops every frame of l's in flight (its connection or its
// declaration ended). The pump's.
func (l *lane) ground() {
	l.inFlight, l.weight = l.inFlight[:0], 0
}

// used records that l was sent to at now (producer ns). It writes only
// when the time moved, once a millisecond at most on the coarse clock:
// senders of many topics would otherwise write each lane's line, which the
// pump and the dispatcher read, for every message.
func (l *lane) used(now int64) {
	if l.lastUsed.Load() != now {
		l.lastUsed.Store(now)
	}
}

// laneState is where a lane's declaration stands on a connection.
type laneState uint8

const (
	undeclared laneState = iota // no TOPIC sent on this connection, or refused
	declaring                   // TOPIC sent, no answer yet
	declared                    // TOPIC_OK processed: batches may be written
)

// laneList is a list of lanes that have work for one goroutine, which takes
// them all at once. A lane is added at most once while its flag is set; the
// taker clears the flag when it has nothing left to do for the lane.
type laneList struct {
	mu    sync.Mutex
	lanes []*lane
}

// add adds l unless flag says it is queued already, and reports whether it
// did.
func (ll *laneList) add(l *lane, flag *atomic.Bool) bool {
	if flag.Load() || !flag.CompareAndSwap(false, true) {
		return false
	}
	ll.mu.Lock()
	ll.lanes = append(ll.lanes, l)
	ll.mu.Unlock()
	return true
}

// push adds l, whose flag its caller knows to be set and which is in no
// list (see kickRoom).
func (ll *laneList) push(l *lane) {
	ll.mu.Lock()
	ll.lanes = append(ll.lanes, l)
	ll.mu.Unlock()
}

// take appends every queued lane to dst and empties the list.
func (ll *laneList) take(dst []*lane) []*lane {
	ll.mu.Lock()
	dst = append(dst, ll.lanes...)
	clear(ll.lanes)
	ll.lanes = ll.lanes[:0]
	ll.mu.Unlock()
	return dst
}

func (ll *laneList) empty() bool {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	return len(ll.lanes) == 0
}

// laneFor returns the lane of topic ("" is the producer's Topic), making
// it on first use. Errors: ErrInvalidMessage for a topic that is not a
// valid name, ErrClosed once Close began, the fence's error once fenced.
func (p *Producer) laneFor(topic string) (*lane, error) {
	if topic == "" || topic == p.cfg.topic {
		return p.def, nil
	}
	if l := p.lanes.Load().get(topic); l != nil {
		return l, nil
	}
	return p.newLane(topic)
}

func (p *Producer) newLane(topic string) (*lane, error) {
	if err := wire.CheckTopic(topic); err != nil {
		return nil, fmt.Errorf("%w: topic: %w", ErrInvalidMessage, err)
	}
	p.lanesMu.Lock()
	defer p.lanesMu.Unlock()
	if l := p.lanes.Load().get(topic); l != nil {
		return l, nil
	}
	if f := p.fenced.Load(); f != nil {
		return nil, *f
	}
	if p.closing.Load() {
		return nil, ErrClosed
	}
	l, err := p.makeLane(topic, p.flatLanes < maxFlatLanes)
	if err != nil {
		return nil, err
	}
	p.def.led.meter()                    // two topics: the budget counts every message
	p.lanes.Store(p.lanes.Load().put(l)) // the same table, or a larger one
	p.topics.Add(1)
	// Appended in place when the array has room: a reader's snapshot never
	// sees past its own length, and nothing below it is written again.
	all := append(p.lanesSnapshot(), l)
	p.all.Store(&all)
	return l, nil
}

// maxFlatLanes and maxFlatSlots bound the lanes whose ring is flat
// (ringbuf.NewFlat: its slots one block, allocated by the first message):
// the first topics a producer makes, which one that writes a topic or two
// sends everything through, with no page table to walk (SendAsync/mem in
// interleaved rounds: 60-69 ns per message against 67-95 paged), while the
// many topics of a producer that writes hundreds cost what they hold, in
// pages of 16 slots. A block holds a topic's share of MaxPending: at most 65536
// slots of 64 bytes (see entry), 4 MiB, allocated by the topic's first message and
// kept until it is forgotten (the Topic option's: for the producer's
// life); beyond that share a lane stays paged.
const (
	maxFlatLanes = 2
	maxFlatSlots = 1 << 16
)

// makeLane builds a lane with its share of the budget, with a flat ring if
// flat and the share allows it (see maxFlatLanes). The caller holds
// lanesMu, or makes the producer's first lane.
func (p *Producer) makeLane(topic string, flat bool) (*lane, error) {
	l := &lane{topic: topic, fresh: true}
	flat = flat && p.cfg.topicPending() <= maxFlatSlots
	led, err := newLedger(p.cfg.topicPending(), p.cfg.topicPendingBytes(), p.cfg.sendTimeout, p.coarse,
		p.budget, func() { p.wakeDispatcher(l) }, p.sweepWake, flat)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	if flat {
		p.flatLanes++
	}
	led.ackedStat = &p.stats.acked
	l.led = led
	return l, nil
}

// lanesSnapshot returns every lane the producer has now, and lanes it
// forgot lately (retired: empty, with a closed ring; compaction drops them
// once they are half the list). No element of the slice is written again:
// iterate it freely.
func (p *Producer) lanesSnapshot() []*lane { return *p.all.Load() }

// retire forgets l if it has nothing pending and nobody claims a position
// in it meanwhile: its ring is closed empty, and it leaves the producer.
// A sender holding l sees ErrClosed with l.retired and looks the topic up
// again. The pump's; never the default lane.
func (p *Producer) retire(l *lane) bool {
	if l == p.def || !l.led.ring.CloseIfEmpty() {
		return false
	}
	l.retired.Store(true)
	if s := l.conn; s != nil {
		// Its frames no longer take room in the connection's window, nor
		// does a place kept for it.
		s.flying -= l.counted
		l.counted = 0
		if l.admitted {
			l.admitted = false
			s.reserved--
		}
		if l.state != undeclared {
			// The connection keeps the topic's id (s.ids), not the lane: a
			// late receipt of the id is then ignored (see OnFrame).
			s.byID.Delete(l.id)
		}
		if l.listed {
			l.listed = false
			if s.parkedGone++; s.parkedGone > len(s.parked)/2 {
				kept := s.parked[:0]
				for _, o := range s.parked {
					if o.listed {
						kept = append(kept, o)
					}
				}
				clear(s.parked[len(kept):])
				s.parked, s.parkedGone = kept, 0
			}
		}
	}
	p.lanesMu.Lock()
	p.lanes.Store(p.lanes.Load().del(l))
	p.retiredLanes++
	if l.led.ring.Flat() {
		p.flatLanes--
	}
	if old := p.lanesSnapshot(); p.retiredLanes > len(old)/2 {
		// Into a new array: readers may still iterate the old one.
		all := make([]*lane, 0, len(old)-p.retiredLanes+16)
		for _, o := range old {
			if !o.retired.Load() {
				all = append(all, o)
			}
		}
		p.all.Store(&all)
		p.retiredLanes = 0
	}
	p.topics.Add(-1)
	p.lanesMu.Unlock()
	return true
}

// kickPump tells the pump that l may have something to write (a publish,
// a receipt that opened its window).
func (p *Producer) kickPump(l *lane) {
	if p.pumpDirty.add(l, &l.pumpQueued) {
		p.wakePump()
	}
}

// kickRoom tells the pump that l may have room now (a receipt of its
// frames, or a release of its positions): a lane waiting for room goes back
// to the pump's dirty list, whose flag it holds already; any other is
// kicked as a publish kicks it.
func (p *Producer) kickRoom(l *lane) {
	if l.waiting.Load() && l.waiting.CompareAndSwap(true, false) {
		p.pumpDirty.push(l)
		p.wakePump()
		return
	}
	p.kickPump(l)
}

// wakePump wakes the pump if it is parked (see parkPump).
func (p *Producer) wakePump() {
	if p.pumpParked.Load() {
		select {
		case p.pumpWake <- struct{}{}:
		default:
		}
	}
}

// wakeDispatcher tells the dispatcher that l has something to deliver.
// It signals even when l was queued already: Close, called from a
// callback, waits on the same signal for resolutions (see drain).
func (p *Producer) wakeDispatcher(l *lane) {
	p.dispDirty.add(l, &l.dispQueued)
	p.signalDispatcher()
}

func (p *Producer) signalDispatcher() {
	select {
	case p.dispatchWake <- struct{}{}:
	default:
	}
}
