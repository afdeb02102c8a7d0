package broker

import (
	"errors"
	"fmt"
	"sync"

	"github.com/inflightmq/inflight/wire"
)

// queue hands a session's checked BATCH frames from its reader (the
// transport's goroutine, in Handle) to its appender (a goroutine the
// session starts at its first BATCH and stops in Close), which stores them:
//
//	reader:   push f1   push f2   push f3 ........ push f4
//	appender: take [f1] Append(f1) RECEIPT | take [f2 f3] Append(f2+f3) RECEIPT | take [f4] ...
//
// Whatever waits when an Append starts goes into it, one Store call for
// all of it: the group commit of one connection. Appends of different
// sessions run concurrently, which is how a Store commits them together
// (store/file: one write and one fsync). The queue holds at most
// MaxQueuedBytes (a frame is always taken when nothing waits): beyond it
// push waits for the appender, and so the reader stops reading.
type queue struct {
	mu       sync.Mutex
	frames   []queuedFrame // waiting for the appender, in order
	bytes    int           // their buffers' sizes
	failed   error         // the appender's failure: every later push and Handle returns it
	stopping bool          // Close: store what waits, then exit
	running  bool          // the appender was started
	wake     chan struct{} // capacity 1: frames or stopping, for the appender
	room     chan struct{} // capacity 1: the appender took frames or failed, for a waiting push
	done     chan struct{} // closed when the appender exits

	// queued is the highest sequence ID queued or known stored: the
	// reader's (it is set at HELLO and by push, both on the reader's
	// goroutine).
	queued uint64
}

// queuedFrame is one BATCH waiting to be stored. A frame whose records are
// all queued or stored already has no buffer: it only asks for a receipt.
type queuedFrame struct {
	buf   *[]byte    // the broker pool's buffer holding batch.Data; nil: nothing new
	batch wire.Batch // CodecNone, checked
	skip  int        // leading records queued or stored before
	last  uint64     // the frame's last sequence ID
}

func (q *queue) init() {
	q.wake = make(chan struct{}, 1)
	q.room = make(chan struct{}, 1)
	q.done = make(chan struct{})
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// failure returns the appender's failure, or nil.
func (q *queue) failure() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.failed
}

// push queues f for s's appender, starting it at the first frame. It waits
// while the queue is over MaxQueuedBytes: until the appender takes what
// waits (after the Append in flight returned) or fails. It returns the
// appender's failure instead of queueing after one.
func (q *queue) push(s *Session, f queuedFrame) error {
	size := 0
	if f.buf != nil {
		size = cap(*f.buf)
	}
	q.mu.Lock()
	for q.failed == nil && q.bytes > 0 && q.bytes+size > s.b.cfg.maxQueued {
		q.mu.Unlock()
		<-q.room
		q.mu.Lock()
	}
	if err := q.failed; err != nil {
		q.mu.Unlock()
		s.b.bufs.put(f.buf)
		return err
	}
	q.frames = append(q.frames, f)
	q.bytes += size
	q.queued = max(q.queued, f.last)
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start {
		go s.appendLoop()
	} else {
		signal(q.wake)
	}
	return nil
}

// fail makes every later push and Handle return err (the first failure
// wins), wakes a waiting push and the appender, and drops what waits: the
// appender stores nothing after it.
func (q *queue) fail(err error, b *Broker) {
	q.mu.Lock()
	if q.failed == nil {
		q.failed = err
	}
	for _, f := range q.frames {
		b.bufs.put(f.buf)
	}
	q.frames, q.bytes = nil, 0
	q.mu.Unlock()
	signal(q.room)
	signal(q.wake)
}

// stop makes the appender store what waits and exit, and waits for it.
func (q *queue) stop() {
	q.mu.Lock()
	q.stopping = true
	running := q.running
	q.mu.Unlock()
	if running {
		signal(q.wake)
		<-q.done
	}
}

// take waits until frames wait, and swaps them for spare (emptied). It
// returns nil when the appender is to exit: stopping with nothing left,
// or failed.
func (q *queue) take(spare []queuedFrame) []queuedFrame {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.frames) == 0 && !q.stopping && q.failed == nil {
		q.mu.Unlock()
		<-q.wake
		q.mu.Lock()
	}
	if len(q.frames) == 0 || q.failed != nil {
		return nil
	}
	taken := q.frames
	q.frames, q.bytes = spare[:0], 0
	signal(q.room)
	return taken
}

// appendLoop is the appender: it takes everything queued, stores it with
// one Append and sends one RECEIPT, until the session stops or fails. An
// Append that fails is reported to the producer in an ERROR frame and the
// peer is closed (not when the name was taken over: the taker closed it);
// the reader's next Handle returns the failure.
func (s *Session) appendLoop() {
	q := &s.q
	defer close(q.done)
	var (
		taken []queuedFrame
		a     appendScratch
	)
	for {
		if taken = q.take(taken); taken == nil {
			return
		}
		err := s.appendFrames(taken, &a)
		for i := range taken {
			s.b.bufs.put(taken[i].buf)
		}
		clear(taken)
		if err == nil {
			continue
		}
		q.fail(err, s.b)
		if !errors.Is(err, ErrReplaced) {
			s.b.count(err)
			a.out = wire.AppendError(a.out[:0], wire.Error{Code: codeOf(err), Text: err.Error()})
			_ = s.peer.Send(a.out)
			_ = s.peer.Close()
		}
		return
	}
}

// appendScratch is the appender's reused memory: no allocation per Append
// once warm.
type appendScratch struct {
	recs []Record
	rr   wire.RecordReader // header memory of recs
	out  []byte
}

// appendFrames stores the new records of frames with one Append, under
// the producer name's lock (so an Append of this name never overlaps
// another, and a HELLO for it waits for this one), then sends the RECEIPT:
// the name's last stored sequence ID. It returns ErrReplaced if another
// session took the name over, the Store's error wrapping ErrFenced if the
// Store holds a newer epoch, ErrStore wrapping any other Store error, or
// the Peer's Send error.
func (s *Session) appendFrames(frames []queuedFrame, a *appendScratch) error {
	recs := a.recs[:0]
	defer func() { clear(recs); a.recs = recs[:0] }() // drop references to the buffers
	a.rr.Reset()
	skipped := 0
	for i := range frames {
		f := &frames[i]
		if f.buf == nil {
			skipped += int(f.batch.Count)
			continue
		}
		skipped += f.skip
		var err error
		if recs, err = readRecords(recs, &f.batch, f.skip, &a.rr); err != nil {
			// Checked by the reader: this is a bug, not the producer's.
			return fmt.Errorf("%w: records checked before: %w", ErrStore, err)
		}
	}
	var ack uint64
	err := s.prod.locked(func(ps *producerState) error {
		if ps.owner != s {
			return ErrReplaced
		}
		// The reader dropped what it had queued or known stored; what the
		// name stored since, it stored through this session.
		if len(recs) > 0 {
			if recs[0].Seq <= ps.last {
				return fmt.Errorf("%w: records from %d, but %d is stored", ErrStore, recs[0].Seq, ps.last)
			}
			if err := s.b.store.Append(s.topic, s.name, s.epoch, recs); err != nil {
				if errors.Is(err, ErrFenced) {
					// Another broker fenced this name through the Store: the
					// next HELLO here reads the new epoch.
					ps.loaded = false
					return err
				}
				return fmt.Errorf("%w: %w", ErrStore, err)
			}
			ps.last = recs[len(recs)-1].Seq
		}
		ack = ps.last
		return nil
	})
	if err != nil {
		return err
	}
	a.out = wire.AppendReceipt(a.out[:0], wire.Receipt{Seq: ack})
	err = s.peer.Send(a.out)
	// Counted once the receipt was handed to the peer: a caller that sees
	// Stats().Batches move knows the receipt is on its way.
	s.b.stored.Add(uint64(len(recs)))
	if skipped > 0 {
		s.b.duplicates.Add(uint64(skipped))
	}
	s.b.batches.Add(uint64(len(frames)))
	return err
}

// readRecords appends the records of a checked CodecNone batch, but its
// first skip, to recs as views into the batch's data. Header memory comes
// from rr, which the caller resets once per Append.
func readRecords(recs []Record, b *wire.Batch, skip int, rr *wire.RecordReader) ([]Record, error) {
	it, err := b.Records()
	if err != nil {
		return recs, err
	}
	seq := b.FirstSeq
	for raw, ok := it.Next(); ok; raw, ok = it.Next() {
		if skip > 0 {
			skip--
			seq++
			continue
		}
		// Between Appends recs is all zero (appendFrames clears what it
		// used), so a record without metadata needs only Seq and Payload.
		if len(recs) < cap(recs) {
			recs = recs[:len(recs)+1]
		} else {
			recs = append(recs, Record{})
		}
		r := &recs[len(recs)-1]
		r.Seq, r.Raw = seq, raw
		if p, plain := wire.PlainPayload(raw); plain { // no metadata: the common case, kept cheap
			r.Payload = p
		} else {
			w, err := rr.Read(raw)
			if err != nil {
				return recs, err
			}
			r.Payload, r.Key, r.Headers, r.EventTime = w.Payload, w.Key, w.Headers, w.EventTime
		}
		seq++
	}
	return recs, it.Err()
}

// bufPool holds the buffers queued frames are copied into. Buffers larger
// than keep are left to the garbage collector.
type bufPool struct {
	pool sync.Pool // of *[]byte
	keep int
}

// get returns a buffer of capacity at least n.
func (p *bufPool) get(n int) *[]byte {
	b, _ := p.pool.Get().(*[]byte)
	if b == nil {
		b = new([]byte)
	}
	if cap(*b) < n {
		*b = make([]byte, 0, n)
	}
	return b
}

// put returns b (nil is ignored).
func (p *bufPool) put(b *[]byte) {
	if b == nil || cap(*b) > p.keep {
		return
	}
	*b = (*b)[:0]
	p.pool.Put(b)
}
