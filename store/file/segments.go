package file

// Segments: how the active segment rolls, how a crash in the middle of a
// roll is undone, and retention.
//
// A roll, under f.mu (released only while the bulk of step 1 is fsynced,
// as the group commit does; never while the file is replaced):
//
//	1. fsync PATH                         the segment to seal is durable
//	2. write PATH.next: header (version 7) and a snapshot of every
//	   (topic, producer)'s last sequence ID and epoch; lock it; fsync it
//	3. link PATH -> PATH.<n>; fsync dir     the segment is sealed under its number
//	4. rename PATH.next -> PATH; fsync dir  the new active segment
//
// A crash before 3 leaves PATH.next, which holds no record: Open
// removes it. A crash between 3 and 4 leaves PATH.<n> and PATH as one file:
// Open removes the link PATH.<n> (PATH still names the data) and
// the store goes on in PATH. After 4 the roll is complete. At every step
// each record is named by PATH or PATH.<n>, so a crash loses nothing. A
// reader, which undoes nothing, drops the sealed segment that is the file
// it opened as PATH (see openReader).

import (
	"cmp"
	"errors"
	"fmt"
	"github.com/inflightmq/inflight/broker"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/inflightmq/inflight/wire"
)

// segment is a sealed segment.
type segment struct {
	num     uint64
	path    string
	size    int64
	written time.Time // when its last entry was written: its file's modification time
}

// SegmentInfo describes one segment of a Store.
type SegmentInfo struct {
	Path    string
	Bytes   int64
	Written time.Time // a sealed segment's last write (its file's modification time, which RetainAge goes by); zero for the active segment
}

// sealedDigits is the width of a sealed segment's number in its name.
const sealedDigits = 20

func sealedName(path string, num uint64) string {
	n := strconv.FormatUint(num, 10)
	return path + "." + strings.Repeat("0", sealedDigits-len(n)) + n
}

// listSealed returns the sealed segments of the store at path, oldest
// first.
func listSealed(path string) ([]segment, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil // Open says so when it opens path
		}
		return nil, err
	}
	var out []segment
	for _, e := range ents {
		suffix, ok := strings.CutPrefix(e.Name(), base+".")
		if !ok || len(suffix) != sealedDigits || strings.Trim(suffix, "0123456789") != "" {
			continue
		}
		num, err := strconv.ParseUint(suffix, 10, 64)
		if err != nil || num == 0 {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed by a writer's retention meanwhile (we are a reader)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, segment{num: num, path: filepath.Join(dir, e.Name()), size: info.Size(), written: info.ModTime()})
	}
	slices.SortFunc(out, func(a, b segment) int { return cmp.Compare(a.num, b.num) })
	return out, nil
}

// retainedPrefix splits the sealed segments at their last hole: Retention
// removes the oldest first, each removal made durable (its directory
// fsynced) before the next, so a missing segment means that every older
// one was being removed too: those older than the last hole are what an
// interrupted retention left (or one of an older inflight, which fsynced
// the directory once for several removals, so that a crash could keep an
// older one), and kept the rest. Records of the store were never in a hole.
func retainedPrefix(sealed []segment) (leftover, kept []segment) {
	for i := len(sealed) - 1; i > 0; i-- {
		if sealed[i].num != sealed[i-1].num+1 {
			return sealed[:i], sealed[i:]
		}
	}
	return nil, sealed
}

// finishRetention removes, oldest first, the segments an interrupted
// retention left (see retainedPrefix), fsyncing the directory after each,
// and returns how many.
func (f *Store) finishRetention(leftover []segment) (int, error) {
	for i, s := range leftover {
		if err := f.cfg.fs.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return i, fmt.Errorf("inflight/file: open store: finish an interrupted retention: %w", err)
		}
		if err := f.cfg.fs.SyncDir(filepath.Dir(f.path)); err != nil {
			return i, fmt.Errorf("inflight/file: open store: %w", err)
		}
	}
	return len(leftover), nil
}

// undoRoll removes what a roll that a crash interrupted left behind (see
// the top of this file). active is the locked active segment.
func (f *Store) undoRoll(active *os.File, sealed []segment) error {
	changed := false
	switch err := f.cfg.fs.Remove(f.path + ".next"); {
	case err == nil:
		changed = true
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("inflight/file: open store: remove the leftover of a roll: %w", err)
	}
	if len(sealed) > 0 {
		newest := sealed[len(sealed)-1]
		a, err := active.Stat()
		if err != nil {
			return fmt.Errorf("inflight/file: open store: %w", err)
		}
		b, err := os.Stat(newest.path)
		if err != nil {
			return fmt.Errorf("inflight/file: open store: %w", err)
		}
		if os.SameFile(a, b) {
			if err := f.cfg.fs.Remove(newest.path); err != nil {
				return fmt.Errorf("inflight/file: open store: undo an interrupted roll: %w", err)
			}
			changed = true
		}
	}
	if changed {
		if err := f.cfg.fs.SyncDir(filepath.Dir(f.path)); err != nil {
			return fmt.Errorf("inflight/file: open store: %w", err)
		}
	}
	return nil
}

// mustRollLocked reports whether an entry of size bytes is to go into a
// new segment: it would take the active one past SegmentBytes, and the
// active one holds at least one entry (a larger entry gets a segment of its
// own).
func (f *Store) mustRollLocked(size int64) bool {
	// Counted from the first record entry: the snapshot grows with every
	// producer the store has seen, and must not make every Append roll.
	return f.end > f.body && f.end-f.body+size > f.cfg.segmentBytes
}

// unlockedSealSync is how much unsynced data a roll fsyncs with f.mu
// released (Appends that still fit go on meanwhile) before the last fsync
// under the lock.
const unlockedSealSync = 1 << 20

// rollLocked seals the active segment and starts a new one (see the top of
// this file), unless, once no fsync is in progress, an entry of size bytes
// no longer needs it. Called with f.mu held; it waits (releasing f.mu) for
// an fsync in progress to finish, so that it never replaces the file under
// it. A failure is sticky, like a failed write: the store is reopened to
// recover.
func (f *Store) rollLocked(size int64) error {
	for tries := 0; ; tries++ {
		for f.flushing {
			f.cond.Wait()
		}
		if err := f.usableLocked(); err != nil {
			return err
		}
		if !f.mustRollLocked(size) {
			return nil // another Append rolled while we waited
		}
		// The segment to seal must be on disk before the new segment's
		// snapshot vouches for its records (under FsyncNone and
		// FsyncInterval most of it may be in the page cache only): the
		// bulk of it is fsynced with f.mu released, as syncLocked does,
		// then the rest under the lock.
		if f.end-f.synced <= unlockedSealSync || tries == 3 {
			break
		}
		if err := f.syncLocked(f.end); err != nil {
			return err
		}
	}
	fail := func(step string, err error) error {
		f.failed = fmt.Errorf("%w: roll %s: %s: %w", broker.ErrStoreFailed, f.path, step, err)
		return f.failed
	}
	if err := f.flushLocked(); err != nil {
		return err
	}
	if err := f.file.Sync(); err != nil {
		return fail("fsync the segment to seal", err)
	}
	f.synced = f.end
	f.stats.syncs.Add(1)
	written := f.cfg.now() // the sealed segment's last write, for RetainAge
	if st, err := f.file.Stat(); err == nil {
		written = st.ModTime()
	}
	now := f.cfg.now()
	f.forgetLocked(now)
	head := appendSnapshot(appendHeader(nil, rolledVersion), f.st, now)

	next := f.path + ".next"
	nf, err := f.cfg.fs.OpenFile(next, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fail("create the new segment", err)
	}
	var file storeFile = osFile{nf}
	if f.cfg.wrap != nil {
		file = f.cfg.wrap(file)
	}
	err = lockFile(nf)
	if err == nil {
		_, err = file.WriteAt(head, 0)
	}
	if err == nil {
		err = file.Sync()
	}
	if err != nil {
		_ = nf.Close()
		_ = f.cfg.fs.Remove(next)
		return fail("write the new segment", err)
	}
	sealed := segment{num: f.next, path: sealedName(f.path, f.next), size: f.end - f.base, written: written}
	if err := f.cfg.fs.Link(f.path, sealed.path); err != nil {
		_ = nf.Close()
		_ = f.cfg.fs.Remove(next)
		return fail("seal", err)
	}
	if err := f.cfg.fs.SyncDir(filepath.Dir(f.path)); err != nil {
		_ = nf.Close()
		return fail("seal", err)
	}
	if err := f.cfg.fs.Rename(next, f.path); err != nil {
		_ = nf.Close()
		return fail("switch to the new segment", err)
	}
	if err := f.cfg.fs.SyncDir(filepath.Dir(f.path)); err != nil {
		_ = nf.Close()
		return fail("switch to the new segment", err)
	}
	_ = f.file.Close() // fsynced above; its lock goes, and the new file holds one
	f.file = file
	f.sealed = append(f.sealed, sealed)
	f.next++
	f.base = f.end
	f.end += int64(len(head))
	f.body, f.synced, f.written = f.end, f.end, f.end
	f.retainLocked(now)
	return nil
}

// retainLocked removes, oldest first, the sealed segments that RetainAge
// or RetainBytes no longer keep, fsyncing the directory after each, and
// returns how many it removed. The
// active segment is never removed, so the store may stay above RetainBytes
// by up to one segment. A segment it cannot remove stays, and is tried
// again at the next roll or tick.
func (f *Store) retainLocked(now time.Time) int {
	if f.cfg.retainAge <= 0 && f.cfg.retainBytes <= 0 {
		return 0
	}
	total := f.end - f.base
	for _, s := range f.sealed {
		total += s.size
	}
	removed := 0
	for len(f.sealed) > 0 {
		s := f.sealed[0]
		old := f.cfg.retainAge > 0 && now.Sub(s.written) > f.cfg.retainAge
		big := f.cfg.retainBytes > 0 && total > f.cfg.retainBytes
		if !old && !big {
			break
		}
		if err := f.cfg.fs.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			break
		}
		total -= s.size
		f.sealed = f.sealed[1:]
		removed++
		// Before the next removal: a crash then leaves the oldest
		// segments removed, never one with an older one kept (which
		// retainedPrefix would have to take for an interrupted
		// retention). A removal a crash undoes is done again.
		if f.cfg.fs.SyncDir(filepath.Dir(f.path)) != nil {
			break
		}
	}
	return removed
}

// forgetLocked drops the producer names that have not fenced or appended
// for ForgetProducersAfter (if set) and have no live session (see Pin),
// each with every topic's last sequence ID, and returns how many. When it
// drops any, it reserves an epoch above every one ever given (see state):
// a forgotten incarnation that comes back is below it, fenced, never taken
// for the newest; a new one gets an epoch above it. Called only by a roll,
// whose snapshot then carries the floor and not the names, so that replay
// never brings back a name after its new incarnation wrote.
func (f *Store) forgetLocked(now time.Time) int {
	if f.cfg.forgetAfter <= 0 {
		return 0
	}
	n := 0
	for name, s := range f.st.names {
		if s.pins == 0 && now.UnixNano()-s.seen > int64(f.cfg.forgetAfter) {
			delete(f.st.names, name)
			n++
		}
	}
	if n > 0 {
		for k := range f.st.streams {
			if _, ok := f.st.names[k.producer]; !ok {
				delete(f.st.streams, k)
			}
		}
		if f.st.epochs < math.MaxUint64 {
			f.st.epochs++
		}
		f.st.floor = f.st.epochs
	}
	return n
}

// retainEvery is how often the maintenance goroutine looks for segments
// that aged out: a tenth of the age, within [10ms, 1min].
func retainEvery(age time.Duration) time.Duration {
	return min(max(age/10, 10*time.Millisecond), time.Minute)
}

// rebuildActive gives an active segment that lost its snapshot (with
// Repair; what followed its header is in a side file already) a new one,
// rebuilt from the sealed segments: it writes a rolled segment's header
// (version 7) and the snapshot from offset 0, fsyncs, and returns the offset after them.
func (f *Store) rebuildActive() (int64, error) {
	if err := f.rebuildFromSealed(); err != nil {
		return 0, err
	}
	head := appendSnapshot(appendHeader(nil, rolledVersion), f.st, f.cfg.now())
	if _, err := f.file.WriteAt(head, 0); err != nil {
		return 0, fmt.Errorf("inflight/file: open store: %s: rewrite the snapshot: %w", f.path, err)
	}
	if err := f.file.Sync(); err != nil {
		return 0, fmt.Errorf("inflight/file: open store: %w", err)
	}
	return int64(len(head)), nil
}

// rebuildFromSealed recomputes every (topic, producer)'s last sequence ID
// from the sealed segments, reading each one whole. Only Repair needs it,
// when the damage took the active segment's snapshot.
func (f *Store) rebuildFromSealed() error {
	var rr wire.RecordReader
	for _, s := range f.sealed {
		file, err := os.Open(s.path)
		if err != nil {
			return fmt.Errorf("inflight/file: open store: rebuild the snapshot: %w", err)
		}
		seg, err := replaySegmentFile(file, s.size, f.cfg.now().UnixNano(), f.st, &rr)
		_ = file.Close()
		if err == nil && seg.bad != nil {
			err = &CorruptError{Path: s.path, Offset: seg.bad.off, Bytes: s.size - seg.bad.off, Why: seg.bad.why, Sealed: true}
		}
		if err != nil {
			return fmt.Errorf("inflight/file: open store: rebuild the snapshot: %s: %w", s.path, err)
		}
	}
	return nil
}

// segReplay is what replaySegment found in one segment.
type segReplay struct {
	good    int64          // offset after the last good entry
	body    int64          // offset of the first record entry: after a rolled segment's snapshot
	bad     *badEntryError // the entry at good, if the segment does not end cleanly there
	entries int            // record entries
	records int
}

// replaySegmentFile reads a segment's version from its header, then
// replays it.
func replaySegmentFile(file io.ReaderAt, size, seen int64, m *state, rr *wire.RecordReader) (segReplay, error) {
	v, err := segmentVersion(file, size)
	if err != nil {
		return segReplay{}, err
	}
	return replaySegment(file, size, v, seen, m, rr)
}

// replaySegment reads the entries of a segment of the given version and
// size, raising m to every (topic, producer)'s last sequence ID and epoch in
// it (its snapshot included), dating the entries' producers by seen (Unix
// ns). It stops at the first bad entry (seg.bad). Only a read error is an
// error.
func replaySegment(file io.ReaderAt, size int64, version uint32, seen int64, m *state, rr *wire.RecordReader) (segReplay, error) {
	out := segReplay{body: fileHeaderSize}
	var err error
	out.good, out.bad, err = walkSegment(file, size, version, rr, segmentVisitor{
		snap: func(body []byte, next int64) error {
			_, err := parseSnapshot(body, m)
			out.body = next
			return err
		},
		fence: func(e *fenceEntry) {
			m.raiseName(string(e.name), e.epoch, seen)
		},
		each: func(e *entry) error {
			m.raiseStream(stream{string(e.topic), string(e.name)}, e.last, seen)
			out.entries++
			out.records += int(e.count)
			return nil
		},
	})
	if err != nil {
		return out, fmt.Errorf("replay %w", err)
	}
	return out, nil
}

// segmentReadError is a read error of walkSegment, at the offset of the
// entry it was reading.
type segmentReadError struct {
	off int64
	err error
}

func (e *segmentReadError) Error() string {
	return "at " + strconv.FormatInt(e.off, 10) + ": " + e.err.Error()
}

func (e *segmentReadError) Unwrap() error { return e.err }

// segmentVisitor receives what walkSegment reads: the snapshot a rolled
// segment starts with (and the offset after it), every fence entry
// (nil: skipped, as readers of records do) and every record entry, parsed
// and checked.
type segmentVisitor struct {
	from  int64 // where to start: an entry's offset; 0: the first entry
	snap  func(body []byte, next int64) error
	fence func(e *fenceEntry)
	each  func(e *entry) error
}

// segmentEntries walks a segment as walkSegment does, from the entry at
// from (0: the first), for its snapshot and its record entries; fence
// entries are checked and skipped.
func segmentEntries(file io.ReaderAt, from, end int64, version uint32, rr *wire.RecordReader,
	snap func(body []byte, next int64) error, each func(e *entry) error) (good int64, bad *badEntryError, err error) {
	return walkSegment(file, end, version, rr, segmentVisitor{from: from, snap: snap, each: each})
}

// walkSegment reads and checks the entries of a segment of the given
// version up to end, handing them to v. It returns the offset after the
// last good entry and the bad entry there (nil at a clean end): a torn,
// implausible or CRC-failing entry, a snapshot v.snap refuses, in a rolled
// segment an entry that is neither a record nor a control entry, a control
// entry in a version before fences, or a body parseEntry or parseFence
// refuses. err is a read error (a *segmentReadError) or v.each's error, as
// it returned it; the walk stops at either.
func walkSegment(file io.ReaderAt, end int64, version uint32, rr *wire.RecordReader, v segmentVisitor) (good int64, bad *badEntryError, err error) {
	w := segmentWalker{r: newEntryReaderAt(file, max(v.from, fileHeaderSize), end), version: version, rr: rr}
	for {
		it, err := w.next()
		switch {
		case err == io.EOF:
			return it.start, nil, nil
		case err != nil:
			return it.start, nil, &segmentReadError{it.start, err}
		case it.bad != nil:
			return it.start, it.bad, nil
		case it.snap != nil:
			if err := v.snap(it.snap, w.r.off); err != nil {
				return it.start, &badEntryError{it.start, "malformed snapshot: " + err.Error(), tailOther}, nil
			}
		case it.fence != nil:
			if v.fence != nil {
				v.fence(it.fence)
			}
		default:
			if err := v.each(&it.rec); err != nil {
				return w.r.off, nil, err
			}
		}
	}
}

// segmentWalker reads the entries of a segment one at a time, telling
// them apart and checking them: walkSegment's step, and Reader's.
type segmentWalker struct {
	r       *entryReader
	version uint32
	rr      *wire.RecordReader
}

// walked is one entry a segmentWalker read: a rolled segment's snapshot
// (snap, its body, unchecked), a fence entry, a record entry (rec, parsed
// and checked), or a bad entry (bad). Its slices alias the entry reader's
// buffer: valid until the next step.
type walked struct {
	start int64 // the entry's offset
	snap  []byte
	fence *fenceEntry
	rec   entry
	bad   *badEntryError
}

// next reads the next entry; io.EOF at a clean end, or a read error (the
// entry's offset is in the result either way).
func (w *segmentWalker) next() (walked, error) {
	it := walked{start: w.r.off}
	body, err := w.r.next()
	if bad, ok := err.(*badEntryError); ok {
		it.bad = bad
		return it, nil
	}
	if err != nil {
		return it, err
	}
	switch {
	case rolled(w.version) && it.start == fileHeaderSize:
		it.snap = body
	case rolled(w.version) && body[0] != entryV2:
		it.bad = &badEntryError{it.start, "malformed: not a record entry", tailOther}
	case isControl(body):
		f, err := parseFence(body, w.version)
		if err != nil {
			it.bad = &badEntryError{it.start, "malformed: " + err.Error(), tailOther}
		} else {
			it.fence = &f
		}
	default:
		if it.rec, err = parseEntry(body, w.rr); err != nil {
			it.bad = &badEntryError{it.start, "malformed: " + err.Error(), tailOther}
		}
	}
	return it, nil
}

// Segments describes the store's segments, sealed ones oldest first, the
// active one last. After Close it returns nil. Safe for concurrent use.
func (f *Store) Segments() []SegmentInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	out := make([]SegmentInfo, 0, len(f.sealed)+1)
	for _, s := range f.sealed {
		out = append(out, SegmentInfo{Path: s.path, Bytes: s.size, Written: s.written})
	}
	return append(out, SegmentInfo{Path: f.path, Bytes: f.written - f.base})
}
