package broker

import (
	"cmp"
	"errors"
	"fmt"
	"unsafe"

	"github.com/inflightmq/inflight/wire"
)

// A topic's goroutine keeps its scratch memory (see appendScratch) between
// Appends only while it is small (keepScratch) and while frames keep
// coming; then it goes back to the broker's pool. So a topic that stores
// small frames at a steady rate allocates nothing, and an idle one holds
// none of it.
const keepScratch = 32 << 10

// appendScratch is a topic goroutine's reused memory: no allocation per
// Append once warm. A goroutine takes one from the broker's pool and gives
// it back when it exits; it holds at most a chunk's index (maxAppendIndex).
type appendScratch struct {
	recs    []Record          // the chunk of records for the next Append
	index   int64             // the bytes of Records and Headers in recs
	headers int64             // the bytes of Headers in recs
	rr      wire.RecordReader // header memory of recs, as much as headers ever was
	maxHdr  int64             // the most headers ever was
	out     []byte
	frames  []Frame // the frames for the next AppendFrames (see appendViaFrames)
}

// reset empties the chunk, zeroing the Records it used.
func (a *appendScratch) reset() {
	clear(a.recs)
	a.maxHdr = max(a.maxHdr, a.headers)
	a.recs, a.index, a.headers = a.recs[:0], 0, 0
	a.rr.Reset()
}

// grow makes room in a.recs, empty, for the Records of frames that one
// Append takes, with one allocation where append would make several
// (append grows a slice of more than 256 Records by about a quarter at a
// time: some five times the final size allocated and four times copied).
// It sizes it for what the index of one Append may hold (maxAppendIndex:
// the Records, and the headers of every record of frames, skipped ones
// included, which the budget charges beside them), so it never holds more
// than the frames' charge covers; a larger need than that grows the slice
// by append, as before. A slice too small at least doubles, so that a
// topic whose Appends grow does not allocate at each new size.
func (a *appendScratch) grow(frames []queuedFrame) {
	n, heads := 0, 0
	for i := range frames {
		if f := &frames[i]; f.hasRecords() {
			n += int(f.batch.Count) - f.skip
			heads += f.heads
		}
	}
	room := max(maxAppendIndex-min(int64(heads)*headerIndex, maxAppendIndex), 0) / recordIndex
	n = min(n, int(room))
	if len(a.recs) == 0 && cap(a.recs) < n {
		a.recs = make([]Record, 0, max(n, min(2*cap(a.recs), int(room))))
	}
}

// large reports whether a holds more than keepScratch.
func (a *appendScratch) large() bool {
	return int64(cap(a.recs))*recordIndex+int64(cap(a.frames))*int64(unsafe.Sizeof(Frame{}))+a.maxHdr > keepScratch
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

// appendFrames stores the new records of t's frames: with one AppendFrames
// of them all if the Store is a FrameAppender, otherwise with one Append
// per chunk of at most maxAppendIndex of Records and Headers (one, unless
// the frames hold tens of thousands of records); t.last is then what to
// acknowledge. It returns the records stored and skipped (duplicates), and
// ErrReplaced if another session took the name over, the Store's error
// wrapping ErrFenced if the Store holds a newer epoch, or ErrStore wrapping
// any other Store error.
func (s *Session) appendFrames(t *topic, frames []queuedFrame, a *appendScratch) (stored, skipped int, err error) {
	if fa, ok := s.b.store.(FrameAppender); ok {
		return s.appendViaFrames(t, fa, frames, a)
	}
	a.grow(frames)
	for i := range frames {
		f := &frames[i]
		if !f.hasRecords() {
			skipped += int(f.batch.Count)
			continue
		}
		skipped += f.skip
		n, err := s.readFrame(t, f, a)
		stored += n
		if err != nil {
			a.reset() // the scratch goes back to the pool: no stale records
			return stored, skipped, err
		}
	}
	stored += len(a.recs)
	return stored, skipped, s.storeChunk(t, a)
}

// appendViaFrames is appendFrames through a FrameAppender: one
// AppendFrames for the new records of all of frames, a frame's first
// f.skip records left out (stored or queued before), with storeChunk's
// checks and errors (see storeLocked).
func (s *Session) appendViaFrames(t *topic, fa FrameAppender, frames []queuedFrame, a *appendScratch) (stored, skipped int, err error) {
	defer func() { // drop the references to the frames' buffers
		clear(a.frames)
		a.frames = a.frames[:0]
	}()
	for i := range frames {
		f := &frames[i]
		if !f.hasRecords() {
			skipped += int(f.batch.Count) // only a receipt to send
			continue
		}
		fr, err := f.newRecords()
		if err != nil {
			return 0, skipped, err
		}
		a.frames = append(a.frames, fr)
		stored += fr.Count
		skipped += f.skip
	}
	if len(a.frames) == 0 {
		return 0, skipped, nil
	}
	last := a.frames[len(a.frames)-1]
	err = s.storeLocked(t, a.frames[0].FirstSeq, last.FirstSeq+uint64(last.Count)-1, func() error {
		return fa.AppendFrames(t.name, s.name, s.epoch, a.frames)
	})
	if err != nil {
		return 0, skipped, err
	}
	return stored, skipped, nil
}

// newRecords returns the records of f that are not stored or queued
// before (all but its first f.skip) as a Frame: a view of the records
// block's tail, its capacity capped.
func (f *queuedFrame) newRecords() (Frame, error) {
	data := f.batch.Data
	fr := Frame{FirstSeq: f.batch.FirstSeq, Count: int(f.batch.Count), Records: data[:len(data):len(data)]}
	if f.skip == 0 {
		return fr, nil
	}
	it, err := f.batch.Records()
	for k := 0; err == nil && k < f.skip; k++ {
		if _, ok := it.Next(); !ok {
			err = cmp.Or(it.Err(), fmt.Errorf("record %d of the %d stored or queued before is missing", k+1, f.skip))
		}
	}
	if err != nil { // checked by the reader: a bug, not the producer's
		return Frame{}, fmt.Errorf("%w: records checked before: %w", ErrStore, err)
	}
	return Frame{FirstSeq: fr.FirstSeq + uint64(f.skip), Count: fr.Count - f.skip, Records: it.Rest()}, nil
}

// readFrame adds the records of a checked frame, but its first f.skip, to
// a.recs as views into the frame's buffer; when the next record would take
// the chunk's index past maxAppendIndex, it stores the chunk first. It
// returns the number of records it stored so.
func (s *Session) readFrame(t *topic, f *queuedFrame, a *appendScratch) (int, error) {
	fr, err := f.newRecords()
	if err != nil {
		return 0, err
	}
	it := wire.NewRecordIter(fr.Records, uint32(fr.Count))
	stored, seq, first := 0, fr.FirstSeq, true
	for raw, ok := it.Next(); ok; raw, ok = it.Next() {
		if a.index+recordIndex > maxAppendIndex {
			stored += len(a.recs)
			if err := s.storeChunk(t, a); err != nil {
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
		r.Seq, r.Raw, r.FrameStart = seq, raw, first
		first = false
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
			start := r.FrameStart
			a.recs = a.recs[:len(a.recs)-1]
			*r = Record{}
			stored += len(a.recs)
			if err := s.storeChunk(t, a); err != nil {
				return stored, err
			}
			a.recs = a.recs[:1]
			r = &a.recs[0]
			r.Seq, r.Raw, r.FrameStart = seq-1, raw, start
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

// storeChunk appends a.recs (none: does nothing) under the (topic, name)
// pair's lock, empties the chunk and sets t.last.
func (s *Session) storeChunk(t *topic, a *appendScratch) error {
	recs := a.recs
	defer a.reset() // drop references to the buffers
	if len(recs) == 0 {
		return nil
	}
	return s.storeLocked(t, recs[0].Seq, recs[len(recs)-1].Seq, func() error {
		return s.b.store.Append(t.name, s.name, s.epoch, recs)
	})
}

// storeLocked makes the Store call store, of t's records first to last,
// under the (topic, name) pair's lock, unless another session took the
// name over (ErrReplaced); then t.last is last. A first not above t.last
// is a bug (ErrStore); the Store's error is returned as it is if it wraps
// ErrFenced, otherwise wrapped in ErrStore.
func (s *Session) storeLocked(t *topic, first, last uint64, store func() error) error {
	t.lock.mu.Lock()
	defer t.lock.mu.Unlock()
	if s.prod.owner.Load() != s {
		return ErrReplaced
	}
	if first <= t.last {
		// The reader skips what is queued or stored: a bug, not the producer's.
		return fmt.Errorf("%w: records of topic %q from %d, but %d is stored", ErrStore, t.name, first, t.last)
	}
	if err := store(); err != nil {
		if errors.Is(err, ErrFenced) {
			return err // another broker fenced this name through the Store
		}
		return fmt.Errorf("%w: topic %q: %w", ErrStore, t.name, err)
	}
	t.last = last
	return nil
}
