package file

// Reading a store while it is written: a Reader follows the segments from
// a Position, record by record, across rolls and retention, and waits for
// more at the end.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/wire"
)

// A Reader's errors, besides a *CorruptError (damage), a read error and
// the context's error.
var (
	// ErrSegmentsRemoved is returned by Reader.Next, once, when retention
	// removed segments before the reader read them (its position's segment
	// is gone, or the one after it), or when the reader can no longer tell
	// whether it did (the segment it was reading was removed before it
	// could see which came next): records may be missing. The next call
	// goes on with the oldest segment left.
	ErrSegmentsRemoved = errors.New("inflight/file: segments removed before the reader read them")
	// ErrStoreCut is returned by Reader.Next when the active segment is now
	// shorter than the reader's position: the store was cut below it (a
	// torn tail after a machine crash, or a repair). What the reader read
	// past the cut was written but, after that crash, not acknowledged
	// (see FsyncPolicy); the reader cannot go on from its position.
	ErrStoreCut = errors.New("inflight/file: the store was cut below the reader's position")
	// ErrReaderClosed is returned by Reader.Next after Close.
	ErrReaderClosed = errors.New("inflight/file: reader closed")
)

// Position is where a Reader is in a store: the next record it returns.
// The zero Position is the beginning of the store: its oldest record still
// retained. Record.Resume is the position after a record; a Position is
// plain data, which a program may keep (in a file, beside what it did with
// the records) and pass to OpenReader to go on where it stopped, in this
// process or another. It is valid for the store it came from, and only as
// the Reader made it.
type Position struct {
	// Segment is the number of the segment (PATH.<Segment> once sealed);
	// for the active segment, the number it will be sealed under, or 0
	// when the reader cannot know it yet (no segment was sealed before it
	// when the reader opened it). It is there for people: OpenReader finds
	// the segment by Check.
	Segment uint64
	// Offset is the offset in the segment of the entry that holds the next
	// record.
	Offset int64
	// Record is how many records of that entry were read.
	Record uint32
	// Check is the CRC-32C of the segment's first entry (the snapshot a
	// roll starts a segment with), which tells the segment apart from any
	// other; 0 at the beginning of the store.
	Check uint32
}

// String returns the position as "segment 3 offset 8192 record 2 check
// 1a2b3c4d".
func (p Position) String() string {
	return fmt.Sprintf("segment %d offset %d record %d check %08x", p.Segment, p.Offset, p.Record, p.Check)
}

// Record is a record that a Reader read: its topic and producer name, the
// record, and the position after it. The record's slices (payload, key,
// header values) are valid until the next call of Next.
type Record struct {
	Topic    string
	Producer string
	broker.Record
	Resume Position // OpenReader(path, Resume) goes on with the record after this one
}

// ReaderOption configures OpenReader.
type ReaderOption func(*readerConfig)

type readerConfig struct {
	poll time.Duration
}

// defaultPoll is how often, by default, a Reader at the end of the store
// looks for more.
const defaultPoll = 50 * time.Millisecond

// damageSettle is how long a bad entry with an intact entry after it must
// stay so in the active segment before the Reader calls it damage: a write
// in progress can show its bytes out of order to a reader for a moment.
const damageSettle = time.Second

// PollInterval sets how often a Reader at the end of the store looks for
// more records (default 50ms): the delay between a record's write and
// Next's return, at most. It must be positive.
func PollInterval(d time.Duration) ReaderOption {
	return func(c *readerConfig) { c.poll = d }
}

// Reader reads the records of a store in the order they were appended,
// from a Position on, and follows the store as it is written: at the end,
// Next waits for more. It reads without a lock and writes nothing, so it
// runs beside the Store that writes the store (in this process or another,
// such as inflight serve), and any number of Readers may read one store.
//
// What a Reader sees: every record written to the store's files, in file
// order, each once, fence entries and snapshots skipped. A record is
// written before the store fsyncs it (FsyncBatch: before it is
// acknowledged), so after a machine crash a Reader may have seen records
// that the store no longer holds, which no producer was told were stored;
// then Next returns ErrStoreCut.
//
// Rolls: a Reader keeps the segment it reads open, and goes from a segment
// to the next once the segment was sealed and read to its end, so a roll
// costs it nothing and it never skips or repeats a record. Retention: a
// segment the Reader has open stays readable when retention removes it
// (its file stays open; on Unix); a segment removed before the Reader
// opened it is reported with ErrSegmentsRemoved, and the Reader goes on
// with the oldest segment left. Damage: a sealed segment's damaged entry
// stops the Reader with a *CorruptError (as Store.Scan does), returned by
// every later Next: Position with Offset set to CorruptError.Next, passed
// to OpenReader, goes on after it; damage in the active segment is told
// from a write in progress by waiting a second for it to change.
//
// A Reader is for one goroutine: its methods must not be called
// concurrently. It owns no goroutine.
type Reader struct {
	path string
	poll time.Duration

	seg     *os.File // the segment being read; nil after Close
	num     uint64   // its number; 0 while unknown
	sealed  bool     // seg is sealed: its end is final
	version uint32   // seg's format version; 0 until its header was read
	check   uint32   // the CRC of seg's first entry; 0 until there is one

	er      entryReader // reads seg from er.off up to er.end when erValid
	erValid bool
	rr      wire.RecordReader

	off     int64  // the entry that holds the next record
	done    uint32 // records of the entry at off already returned
	cur     entry  // the entry at off, parsed, while left > 0
	left    uint32 // records of cur not yet returned
	curNext int64  // the offset after cur

	topic, producer string
	gap             error     // ErrSegmentsRemoved, for the next call of Next
	badOff          int64     // a bad entry in the active segment, and since when
	badSince        time.Time // (zero: none)
	stuck           error     // a *CorruptError of a sealed segment: every Next returns it
}

// OpenReader opens a Reader on the store at path (the path Open takes),
// positioned at from: the zero Position for the beginning of the store,
// or a Record's Resume. If the segment of from is gone (retention removed
// it), the Reader starts at the oldest segment left and its first Next
// returns ErrSegmentsRemoved. It returns an error wrapping fs.ErrNotExist
// for a store that does not exist, and one wrapping ErrInvalidOption for
// an option out of range. Nothing of the store is written or locked.
func OpenReader(path string, from Position, opts ...ReaderOption) (*Reader, error) {
	cfg := readerConfig{poll: defaultPoll}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.poll <= 0 {
		return nil, fmt.Errorf("%w: PollInterval %v, must be positive", ErrInvalidOption, cfg.poll)
	}
	if from.Offset < 0 || from.Check != 0 && from.Offset < fileHeaderSize {
		return nil, fmt.Errorf("inflight/file: open reader: position %v: not a position of a store", from)
	}
	r := &Reader{path: path, poll: cfg.poll}
	r.er.r = bufio.NewReaderSize(nil, 64<<10)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("inflight/file: open reader: %w", err)
	}
	if from.Check != 0 {
		found, err := r.find(from)
		if err != nil {
			return nil, err
		}
		if found {
			r.off, r.done = from.Offset, from.Record
			return r, nil
		}
		r.gap = fmt.Errorf("%w: the segment of %v is gone; going on with the oldest segment left", ErrSegmentsRemoved, from)
	}
	if err := r.openOldest(); err != nil {
		return nil, err
	}
	return r, nil
}

// Next returns the next record, waiting for one (looking every
// PollInterval) until ctx ends, when it returns ctx's error. Other errors:
// ErrSegmentsRemoved (once; the next call goes on), ErrStoreCut, a
// *CorruptError (wrapping ErrCorrupt), a read error, ErrReaderClosed.
func (r *Reader) Next(ctx context.Context) (Record, error) {
	if r.seg == nil {
		return Record{}, ErrReaderClosed
	}
	for {
		if err := ctx.Err(); err != nil {
			return Record{}, err
		}
		if err := r.gap; err != nil {
			r.gap = nil
			return Record{}, err
		}
		if r.stuck != nil {
			return Record{}, r.stuck
		}
		if r.left > 0 {
			r.rr.Reset()
			rec := r.cur.nextRecord(&r.rr)
			r.left--
			r.done++
			if r.left == 0 {
				r.off, r.done = r.curNext, 0
			}
			return Record{Topic: r.topic, Producer: r.producer, Record: rec, Resume: r.Position()}, nil
		}
		got, err := r.readEntry()
		if err != nil {
			return Record{}, err
		}
		if got {
			continue
		}
		moved, err := r.atEnd()
		if err != nil {
			return Record{}, err
		}
		if moved {
			continue
		}
		t := time.NewTimer(r.poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return Record{}, ctx.Err()
		case <-t.C:
		}
	}
}

// Position returns the reader's position: that of the next record.
func (r *Reader) Position() Position {
	return Position{Segment: r.num, Offset: r.off, Record: r.done, Check: r.check}
}

// Close closes the segment the reader has open. It is idempotent; Next
// returns ErrReaderClosed after it.
func (r *Reader) Close() error {
	if r.seg == nil {
		return nil
	}
	err := r.seg.Close()
	r.seg = nil
	return err
}

// setSegment makes f, segment num (0: unknown), the one to read, from its
// first entry.
func (r *Reader) setSegment(f *os.File, num uint64, sealed bool) {
	if r.seg != nil {
		_ = r.seg.Close()
	}
	r.seg, r.num, r.sealed = f, num, sealed
	r.version, r.check, r.erValid = 0, firstCheck(f), false
	r.off, r.done, r.left = fileHeaderSize, 0, 0
	r.badSince = time.Time{}
}

// readEntry reads the entry at r.off: records (then r.left > 0), or a
// snapshot or fence entry, skipped. It returns false when there is no
// complete entry there (yet), and an error for damage or a read error.
func (r *Reader) readEntry() (bool, error) {
	for {
		if !r.erValid || r.off >= r.er.end {
			size, ok, err := r.prepare()
			if !ok || err != nil {
				return false, err
			}
			r.er.r.Reset(io.NewSectionReader(r.seg, r.off, size-r.off))
			r.er.off, r.er.end, r.erValid = r.off, size, true
		}
		w := segmentWalker{r: &r.er, version: r.version, rr: &r.rr}
		it, err := w.next()
		if err == io.EOF {
			r.erValid = false
			return false, nil
		}
		if err != nil {
			r.erValid = false
			return false, fmt.Errorf("inflight/file: read %s: at %d: %w", r.seg.Name(), it.start, err)
		}
		if it.bad == nil && it.snap != nil {
			if _, err := parseSnapshot(it.snap, newState()); err != nil {
				it.bad = &badEntryError{it.start, "malformed snapshot: " + err.Error(), tailOther}
			}
		}
		if it.bad != nil {
			r.erValid = false // the entry reader is past the bytes it read
			if !r.sealed {
				// The file may have grown since the entry reader's end was
				// set: a torn entry there may be whole now.
				if st, err := r.seg.Stat(); err == nil && st.Size() > r.er.end {
					continue
				}
			}
			return false, r.damaged(it.bad)
		}
		r.badSince = time.Time{}
		if r.check == 0 {
			r.check = firstCheck(r.seg)
		}
		if it.rec.count == 0 { // a snapshot or a fence entry
			r.off = r.er.off
			return true, nil
		}
		if r.done >= it.rec.count {
			return false, fmt.Errorf("inflight/file: read %s: position %v: the entry at %d holds %d records", r.seg.Name(), r.Position(), r.off, it.rec.count)
		}
		r.cur, r.curNext, r.left = it.rec, r.er.off, it.rec.count-r.done
		for range r.done { // records read before the position was taken
			r.rr.Reset()
			r.cur.nextRecord(&r.rr)
		}
		if string(it.rec.topic) != r.topic {
			r.topic = string(it.rec.topic)
		}
		if string(it.rec.name) != r.producer {
			r.producer = string(it.rec.name)
		}
		return true, nil
	}
}

// prepare reads the segment's size (and, the first time, its header) for
// a read from r.off; ok is false when there is nothing after r.off (yet).
func (r *Reader) prepare() (size int64, ok bool, err error) {
	st, err := r.seg.Stat()
	if err != nil {
		return 0, false, fmt.Errorf("inflight/file: read %s: %w", r.seg.Name(), err)
	}
	size = st.Size()
	if r.version == 0 {
		if size < fileHeaderSize && !r.sealed {
			return 0, false, nil // being created
		}
		if r.version, err = segmentVersion(r.seg, size); err != nil {
			return 0, false, fmt.Errorf("inflight/file: read %s: %w", r.seg.Name(), err)
		}
	}
	switch {
	case r.off > size && r.sealed:
		return 0, false, fmt.Errorf("inflight/file: read %s: position %v: past the end of the segment (%d bytes)", r.seg.Name(), r.Position(), size)
	case r.off > size:
		return 0, false, fmt.Errorf("%w: %s is %d bytes, the reader was at %v", ErrStoreCut, r.seg.Name(), size, r.Position())
	}
	return size, r.off < size, nil
}

// damaged judges a bad entry: in a sealed segment it is damage (a
// *CorruptError, returned from then on); in the active segment, an entry
// being written, unless an intact entry follows it and that stays so for
// damageSettle. It returns nil to wait.
func (r *Reader) damaged(bad *badEntryError) error {
	st, err := r.seg.Stat()
	if err != nil {
		return fmt.Errorf("inflight/file: read %s: %w", r.seg.Name(), err)
	}
	size := st.Size()
	ce := &CorruptError{Path: r.seg.Name(), Offset: bad.off, Bytes: size - bad.off, Why: bad.why, Sealed: r.sealed}
	next, err := findEntry(r.seg, bad.off+1, size)
	if err != nil {
		return fmt.Errorf("inflight/file: read %s: %w", r.seg.Name(), err)
	}
	if r.sealed {
		ce.Next = max(next, 0)
		r.stuck = ce
		return ce
	}
	// A writer that opened the store may have upgraded the header since
	// it was read (to a version whose fence entries this one refuses).
	if v, err := segmentVersion(r.seg, size); err == nil && v != r.version {
		r.version = v
		return nil
	}
	if next < 0 {
		r.badSince = time.Time{}
		return nil // the end, being written
	}
	if r.badSince.IsZero() || r.badOff != bad.off {
		r.badOff, r.badSince = bad.off, time.Now()
		return nil
	}
	if time.Since(r.badSince) < damageSettle {
		return nil
	}
	ce.Next = next
	return ce
}

// atEnd runs when there is no complete entry at r.off: the active segment
// is looked at again later, unless it was sealed meanwhile (then it is
// read to its end, final now); a sealed segment read to its end is left
// for the next one. moved reports that there is something to read at once.
func (r *Reader) atEnd() (moved bool, err error) {
	if !r.sealed {
		active, err := r.isActive()
		if err != nil || active {
			return false, err
		}
		// Rolled: linked as a sealed segment (which tells its number)
		// before PATH was replaced. What was written before the roll is
		// read first.
		r.sealed = true
		if list, err := listSealed(r.path); err == nil {
			if i := r.indexIn(list); i >= 0 {
				r.num = list[i].num
			}
		}
		return true, nil
	}
	return r.nextSegment()
}

// isActive reports whether the reader's segment is the active segment:
// the file named PATH.
func (r *Reader) isActive() (bool, error) {
	st, err := os.Stat(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("inflight/file: read %s: %w", r.path, err)
	}
	mine, err := r.seg.Stat()
	if err != nil {
		return false, fmt.Errorf("inflight/file: read %s: %w", r.seg.Name(), err)
	}
	return os.SameFile(st, mine), nil
}

// indexIn returns the index of the reader's segment in list, or -1: the
// one of its number if that is the file, else whichever is.
func (r *Reader) indexIn(list []segment) int {
	mine, err := r.seg.Stat()
	if err != nil {
		return -1
	}
	same := func(s segment) bool {
		st, err := os.Stat(s.path)
		return err == nil && os.SameFile(st, mine)
	}
	for i, s := range list {
		if s.num == r.num && same(s) {
			return i
		}
	}
	for i, s := range list {
		if s.num != r.num && same(s) {
			return i
		}
	}
	return -1
}

// nextSegment opens the segment after the reader's, which was sealed and
// read to its end; moved is false when that is the active segment and a
// roll has yet to put it in place (look again later).
func (r *Reader) nextSegment() (moved bool, err error) {
	for range 10 {
		list, err := listSealed(r.path)
		if err != nil {
			return false, fmt.Errorf("inflight/file: read %s: %w", r.path, err)
		}
		if i := r.indexIn(list); i >= 0 {
			r.num = list[i].num
			if i+1 < len(list) {
				f, err := os.Open(list[i+1].path)
				if errors.Is(err, fs.ErrNotExist) {
					continue // retention removed it meanwhile: list again
				}
				if err != nil {
					return false, fmt.Errorf("inflight/file: read %s: %w", r.path, err)
				}
				r.setSegment(f, list[i+1].num, true)
				return true, nil
			}
			f, num, err := r.openActive()
			if errors.Is(err, errRolling) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			if num != r.num+1 {
				_ = f.Close() // a roll came between: the sealed one is next
				continue
			}
			r.setSegment(f, num, false)
			return true, nil
		}
		// Retention removed the reader's segment once it was read (or
		// while). If the segment after it is still there, nothing was
		// missed; otherwise there is no telling what came between.
		if r.num != 0 {
			for _, s := range list {
				if s.num <= r.num {
					continue
				}
				if s.num != r.num+1 {
					break
				}
				f, err := os.Open(s.path)
				if errors.Is(err, fs.ErrNotExist) {
					break
				}
				if err != nil {
					return false, fmt.Errorf("inflight/file: read %s: %w", r.path, err)
				}
				r.setSegment(f, s.num, true)
				return true, nil
			}
		}
		r.gap = fmt.Errorf("%w: segment %d was removed before the reader knew what follows it; going on with the oldest segment left", ErrSegmentsRemoved, r.num)
		return true, r.openOldest()
	}
	return false, fmt.Errorf("inflight/file: read %s: the store changed under every attempt to find the segment after %d", r.path, r.num)
}

// openOldest opens the oldest segment of the store.
func (r *Reader) openOldest() error {
	for range 10 {
		list, err := listSealed(r.path)
		if err != nil {
			return fmt.Errorf("inflight/file: read %s: %w", r.path, err)
		}
		if _, kept := retainedPrefix(list); len(kept) > 0 {
			f, err := os.Open(kept[0].path)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return fmt.Errorf("inflight/file: read %s: %w", r.path, err)
			}
			r.setSegment(f, kept[0].num, true)
			return nil
		}
		f, num, err := r.openActive()
		if errors.Is(err, errRolling) {
			continue // it is sealed now: the list has it
		}
		if err != nil {
			return err
		}
		r.setSegment(f, num, false)
		return nil
	}
	return fmt.Errorf("inflight/file: read %s: the store changed under every attempt to open its oldest segment", r.path)
}

// errRolling: PATH is still the segment a roll just sealed (linked under
// its number, not yet replaced by the new one); the new one is PATH in a
// moment.
var errRolling = errors.New("a roll in progress")

// openActive opens the active segment and returns it with its number: the
// newest sealed segment's plus one, 0 if there is none. A roll between
// the listing and the open is seen, and the open done again; errRolling
// if PATH is the newest sealed segment (a roll between its two steps).
func (r *Reader) openActive() (*os.File, uint64, error) {
	last := func() (segment, error) {
		list, err := listSealed(r.path)
		if err != nil || len(list) == 0 {
			return segment{}, err
		}
		return list[len(list)-1], nil
	}
	for range 10 {
		before, err := last()
		if err != nil {
			return nil, 0, fmt.Errorf("inflight/file: read %s: %w", r.path, err)
		}
		f, err := os.Open(r.path)
		if err != nil {
			return nil, 0, fmt.Errorf("inflight/file: read %s: %w", r.path, err)
		}
		after, err := last()
		if err != nil {
			_ = f.Close()
			return nil, 0, fmt.Errorf("inflight/file: read %s: %w", r.path, err)
		}
		if after.num == before.num {
			if after.num == 0 {
				return f, 0, nil
			}
			mine, err1 := f.Stat()
			sealed, err2 := os.Stat(after.path)
			if err1 == nil && err2 == nil && os.SameFile(mine, sealed) {
				_ = f.Close()
				return nil, 0, errRolling
			}
			return f, after.num + 1, nil
		}
		_ = f.Close()
	}
	return nil, 0, fmt.Errorf("inflight/file: read %s: the store rolled under every attempt to open its active segment", r.path)
}

// find opens the segment whose first entry's CRC is from.Check: first the
// sealed one of from's number, then the active one, then every other; a
// second look covers a roll during the first. It reports whether it found
// it.
func (r *Reader) find(from Position) (bool, error) {
	for range 2 {
		list, err := listSealed(r.path)
		if err != nil {
			return false, fmt.Errorf("inflight/file: open reader: %w", err)
		}
		try := func(s segment) (bool, error) {
			f, err := os.Open(s.path)
			if errors.Is(err, fs.ErrNotExist) {
				return false, nil
			}
			if err != nil {
				return false, fmt.Errorf("inflight/file: open reader: %w", err)
			}
			if firstCheck(f) != from.Check {
				_ = f.Close()
				return false, nil
			}
			r.setSegment(f, s.num, true)
			return true, nil
		}
		for _, s := range list {
			if s.num == from.Segment {
				if ok, err := try(s); ok || err != nil {
					return ok, err
				}
			}
		}
		f, num, err := r.openActive()
		switch {
		case errors.Is(err, errRolling): // PATH is a sealed segment, which the list has
		case err != nil:
			return false, err
		case firstCheck(f) == from.Check:
			r.setSegment(f, num, false)
			return true, nil
		default:
			_ = f.Close()
		}
		for _, s := range list {
			if s.num != from.Segment {
				if ok, err := try(s); ok || err != nil {
					return ok, err
				}
			}
		}
	}
	return false, nil
}

// firstCheck returns the CRC of the first entry of a segment (from its
// header), or 0 if it has none yet.
func firstCheck(f io.ReaderAt) uint32 {
	var b [fileHeaderSize + entryHeaderSize]byte
	if _, err := f.ReadAt(b[:], 0); err != nil {
		return 0
	}
	return binary.BigEndian.Uint32(b[fileHeaderSize+4:])
}
