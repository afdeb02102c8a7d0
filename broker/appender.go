package broker

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"time"

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
// MaxQueuedBytes of frames' charges (see budget.go; a frame is always taken
// when nothing waits): beyond it push waits for the appender, and so the
// reader stops reading.
type queue struct {
	mu       sync.Mutex
	frames   []queuedFrame // waiting for the appender, in order
	bytes    int64         // their charges
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
	buf    *[]byte    // the broker pool's buffer holding batch.Data, or nil
	keep   func()     // or the release of the transport's frame holding batch.Data (HandleKeep)
	batch  wire.Batch // CodecNone, checked
	skip   int        // leading records queued or stored before
	last   uint64     // the frame's last sequence ID
	charge int64      // what it holds of the broker's budget (see budget.go)
}

// hasRecords reports whether f holds records to store (not only a
// receipt to send).
func (f *queuedFrame) hasRecords() bool { return f.buf != nil || f.keep != nil }

// drop returns f's buffer (to the pool, or to the transport) and charge.
func (f *queuedFrame) drop(b *Broker) {
	if f.keep != nil {
		f.keep()
	}
	b.drop(f.buf, f.charge)
	*f = queuedFrame{}
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
	size := f.charge
	q.mu.Lock()
	for q.failed == nil && q.bytes > 0 && q.bytes+size > int64(s.b.cfg.maxQueued) {
		q.mu.Unlock()
		<-q.room
		q.mu.Lock()
	}
	if err := q.failed; err != nil {
		q.mu.Unlock()
		f.drop(s.b)
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
	for i := range q.frames {
		q.frames[i].drop(b)
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
// returns exit when the appender is to exit: stopping with nothing left,
// or failed; and nothing if idle fires first.
func (q *queue) take(spare []queuedFrame, idle <-chan time.Time) (taken []queuedFrame, exit bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.frames) == 0 && !q.stopping && q.failed == nil {
		q.mu.Unlock()
		select {
		case <-q.wake:
		case <-idle:
			q.mu.Lock()
			return nil, false
		}
		q.mu.Lock()
	}
	if len(q.frames) == 0 || q.failed != nil {
		return nil, true
	}
	if cap(spare) > maxKeptFrames {
		spare = nil // after a burst of small frames: let it go
	}
	taken = q.frames
	q.frames, q.bytes = spare[:0], 0
	signal(q.room)
	return taken, false
}

// maxKeptFrames bounds the queue slices an idle session keeps.
const maxKeptFrames = 64

// An appender keeps its scratch memory (see appendScratch) between Appends
// only while it is small (keepScratch) and for at most scratchIdle without
// frames to store; then it goes back to the broker's pool. So a session
// that stores small frames at a steady rate allocates nothing, and an idle
// one holds none of it.
const (
	scratchIdle = time.Second
	keepScratch = 32 << 10
)

// appendLoop is the appender: it takes everything queued, stores it with
// one Append (or several, for more records than maxAppendIndex allows) and
// sends one RECEIPT, until the session stops or fails. An Append that
// fails is reported to the producer in an ERROR frame and the peer is closed
// (not when the name was taken over: the taker closed it); the reader's
// next Handle returns the failure.
func (s *Session) appendLoop() {
	q := &s.q
	defer close(q.done)
	var (
		taken []queuedFrame
		a     *appendScratch
	)
	idle := time.NewTimer(scratchIdle)
	defer idle.Stop()
	defer func() { s.b.putScratch(a) }()
	for {
		var idleC <-chan time.Time
		if a != nil {
			idle.Reset(scratchIdle)
			idleC = idle.C
		}
		var exit bool
		if taken, exit = q.take(taken, idleC); exit {
			return
		}
		if taken == nil { // idle
			s.b.putScratch(a)
			a = nil
			continue
		}
		if a == nil {
			a = s.b.getScratch()
		}
		err := s.appendFrames(taken, a)
		if a.large() {
			// Frames of many records: the scratch goes back at once, so
			// that no session holds a large one between frames.
			s.b.putScratch(a)
			a = nil
		}
		for i := range taken { // after the scratch: no charge left means nothing held
			taken[i].drop(s.b)
		}
		if err == nil {
			continue
		}
		if a == nil {
			a = &appendScratch{}
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

// appendScratch is an appender's reused memory: no allocation per Append
// once warm. Appenders take one from the broker's pool and give it back
// after scratchIdle without frames; it holds at most a chunk's index
// (maxAppendIndex).
type appendScratch struct {
	recs    []Record          // the chunk of records for the next Append
	index   int64             // the bytes of Records and Headers in recs
	headers int64             // the bytes of Headers in recs
	rr      wire.RecordReader // header memory of recs, as much as headers ever was
	maxHdr  int64             // the most headers ever was
	out     []byte
}

// reset empties the chunk, zeroing the Records it used.
func (a *appendScratch) reset() {
	clear(a.recs)
	a.maxHdr = max(a.maxHdr, a.headers)
	a.recs, a.index, a.headers = a.recs[:0], 0, 0
	a.rr.Reset()
}

// large reports whether a holds more than keepScratch.
func (a *appendScratch) large() bool {
	return int64(cap(a.recs))*recordIndex+a.maxHdr > keepScratch
}

func (b *Broker) getScratch() *appendScratch {
	if a, ok := b.scratch.Get().(*appendScratch); ok {
		return a
	}
	return new(appendScratch)
}

func (b *Broker) putScratch(a *appendScratch) {
	if a != nil {
		b.scratch.Put(a)
	}
}

// appendFrames stores the new records of frames, under the producer name's
// lock (so an Append of this name never overlaps another, and a HELLO for
// it waits for this one), with one Append per chunk of at most
// maxAppendIndex of Records and Headers (one, unless the frames hold tens
// of thousands of records), then sends the RECEIPT: the name's last stored
// sequence ID. It returns ErrReplaced if another session took the name
// over, the Store's error wrapping ErrFenced if the Store holds a newer
// epoch, ErrStore wrapping any other Store error, or the Peer's Send error.
func (s *Session) appendFrames(frames []queuedFrame, a *appendScratch) error {
	skipped, stored := 0, 0
	for i := range frames {
		f := &frames[i]
		if !f.hasRecords() {
			skipped += int(f.batch.Count)
			continue
		}
		skipped += f.skip
		n, err := s.readFrame(f, a)
		stored += n
		if err != nil {
			a.reset() // the scratch goes back to the pool: no stale records
			return err
		}
	}
	stored += len(a.recs)
	ack, err := s.storeChunk(a)
	if err != nil {
		return err
	}
	a.out = wire.AppendReceipt(a.out[:0], wire.Receipt{Seq: ack})
	err = s.peer.Send(a.out)
	// Counted once the receipt was handed to the peer: a caller that sees
	// Stats().Batches move knows the receipt is on its way.
	s.b.stored.Add(uint64(stored))
	if skipped > 0 {
		s.b.duplicates.Add(uint64(skipped))
	}
	s.b.batches.Add(uint64(len(frames)))
	return err
}

// readFrame adds the records of a checked frame, but its first f.skip, to
// a.recs as views into the frame's buffer; when the next record would take
// the chunk's index past maxAppendIndex, it stores the chunk first. It
// returns the number of records it stored so.
func (s *Session) readFrame(f *queuedFrame, a *appendScratch) (int, error) {
	it, err := f.batch.Records()
	if err != nil {
		// Checked by the reader: this is a bug, not the producer's.
		return 0, fmt.Errorf("%w: records checked before: %w", ErrStore, err)
	}
	stored, skip, seq := 0, f.skip, f.batch.FirstSeq
	for raw, ok := it.Next(); ok; raw, ok = it.Next() {
		if skip > 0 {
			skip--
			seq++
			continue
		}
		if a.index+recordIndex > maxAppendIndex {
			stored += len(a.recs)
			if _, err := s.storeChunk(a); err != nil {
				return stored, err
			}
		}
		// Between Appends recs is all zero (storeChunk clears what it
		// used), so a record without metadata needs only Seq and Payload.
		if len(a.recs) < cap(a.recs) {
			a.recs = a.recs[:len(a.recs)+1]
		} else {
			a.recs = append(a.recs, Record{})
		}
		r := &a.recs[len(a.recs)-1]
		r.Seq, r.Raw = seq, raw
		a.index += recordIndex
		seq++
		p, plain := wire.PlainPayload(raw)
		if plain { // no metadata: the common case, kept cheap
			r.Payload = p
			continue
		}
		w, err := a.rr.Read(raw)
		if err != nil {
			return stored, fmt.Errorf("%w: records checked before: %w", ErrStore, err)
		}
		if cost := int64(len(w.Headers)) * headerIndex; a.index+cost > maxAppendIndex && len(a.recs) > 1 {
			// Its headers do not fit the chunk: store the chunk without
			// it, and read it again (storeChunk reset the header memory).
			a.recs = a.recs[:len(a.recs)-1]
			*r = Record{}
			stored += len(a.recs)
			if _, err := s.storeChunk(a); err != nil {
				return stored, err
			}
			a.recs = a.recs[:1]
			r = &a.recs[0]
			r.Seq, r.Raw = seq-1, raw
			a.index = recordIndex
			if w, err = a.rr.Read(raw); err != nil {
				return stored, fmt.Errorf("%w: records checked before: %w", ErrStore, err)
			}
		}
		a.index += int64(len(w.Headers)) * headerIndex
		a.headers += int64(len(w.Headers)) * headerIndex
		r.Payload, r.Key, r.Headers, r.EventTime = w.Payload, w.Key, w.Headers, w.EventTime
	}
	if err := it.Err(); err != nil {
		return stored, fmt.Errorf("%w: records checked before: %w", ErrStore, err)
	}
	return stored, nil
}

// storeChunk appends a.recs (none: only reads the last stored sequence ID)
// under the producer name's lock, empties the chunk and returns the name's
// last stored sequence ID.
func (s *Session) storeChunk(a *appendScratch) (uint64, error) {
	recs := a.recs
	defer a.reset() // drop references to the buffers
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
	return ack, err
}

// bufPool holds the buffers queued frames are copied into, in size classes:
// powers of two from minBuf to the frame limit (bufSize). A frame's buffer
// is what it is charged for (see budget.go). Buffers not of a class are left
// to the garbage collector.
type bufPool struct {
	classes []sync.Pool // of *[]byte; classes[i] holds buffers of minBuf<<i bytes
}

const minBufShift = 9 // minBuf: 512 bytes

// bufSize returns the size of the buffer that holds n bytes.
func bufSize(n int) int {
	return 1 << max(bits.Len(uint(max(n, 1)-1)), minBufShift)
}

func newBufPool(maxFrame int) bufPool {
	return bufPool{classes: make([]sync.Pool, bufClass(bufSize(maxFrame))+1)}
}

func bufClass(size int) int { return bits.Len(uint(size-1)) - minBufShift }

// get returns an empty buffer of capacity bufSize(n).
func (p *bufPool) get(n int) *[]byte {
	size := bufSize(n)
	if c := bufClass(size); c < len(p.classes) {
		if b, ok := p.classes[c].Get().(*[]byte); ok {
			return b
		}
	}
	b := make([]byte, 0, size)
	return &b
}

// put returns b (nil is ignored).
func (p *bufPool) put(b *[]byte) {
	if b == nil {
		return
	}
	size := cap(*b)
	if size != bufSize(size) || bufClass(size) >= len(p.classes) {
		return
	}
	*b = (*b)[:0]
	p.classes[bufClass(size)].Put(b)
}
