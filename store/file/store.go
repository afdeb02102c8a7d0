package file

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/wire"
)

// Store is a durable Store: append-only segment files, one entry per
// producer frame of an Append call. It is safe for concurrent use. Only one Store may have a
// store open for writing at a time: Open takes an exclusive lock
// (flock) on the active segment and fails with ErrLocked if another
// process, or another Store of this one, holds it; readers open it with
// ReadOnly. A Store must not be copied.
//
// A store at PATH is the active segment PATH, which Append writes, and the
// sealed segments beside it, PATH.00000000000000000001 and up (20 digits,
// oldest first), which are never written again. When an Append would take
// the active segment past SegmentBytes, the store rolls: the active segment
// becomes the next sealed one and a new PATH starts with a snapshot of every
// (topic, producer)'s last sequence ID and every name's epoch. Opening a
// store replays only PATH, so a restart
// costs one segment whatever the size of the log; RetainAge and RetainBytes
// remove the oldest sealed segments, and a producer's last sequence ID
// outlives them in the snapshots.
//
// The layout of a segment and of its entries is drawn in format.go.
//
// An entry is acknowledged only once it is written whole and fsynced, with
// only intact entries after it. So the end of the active segment follows
// one rule (recover.go; RocksDB's kTolerateCorruptedTailRecords and etcd's
// WAL decide the same way): bytes that cannot be read from some point to
// the end, with no intact entry after them, are a torn tail, and are cut
// (Recovery.TruncatedBytes); an unreadable region with an intact entry
// after it is corruption, which may hide acknowledged records: Open
// refuses the store with a *CorruptError and leaves it untouched, or with
// Repair moves the damaged remainder to a side file. One such region is
// also what a crash leaves (unsynced pages reach the disk in any order): a
// page of zeros before the intact entry; it goes to a side file at open,
// without Repair (Recovery.SideFile). Sealed segments are not read at open
// (that is what keeps a restart cheap): damage there is found by Verify,
// which reads every entry of every segment, and by Scan; it is reported
// with a *CorruptError naming the segment, never cut. Nothing ever deletes
// bytes that could hold acknowledged records, except retention, as
// configured. TestCrashStatesRecover opens every state a crash may leave
// at every step of a workload.
//
// Format versions: a store of version 1 (before topics and metadata), 2
// (before epochs), 3 (a rolled segment before epochs), 4 or 5 (epochs per
// (topic, producer)) opens: version 1 records read as topic
// wire.DefaultTopic without metadata, a version 3 snapshot as one without
// epochs, an epoch of a (topic, producer) as its name's, and Open rewrites
// the active segment's header to version 6 (a store that never rolled) or
// 7 (a rolled segment) before it could write a name fence entry
// (Recovery.UpgradedFrom says so), after which an older inflight refuses
// the file instead of misreading it. Sealed segments keep their version. A
// version it does not know is refused with ErrCorrupt, file untouched.
//
// Durability follows the FsyncPolicy; a roll fsyncs the segment it seals
// and the new one, whatever the policy (the bulk of the first with the
// store's lock released). After a failed write or fsync the
// state of the file is unknown: the store refuses every later Append,
// Fence and State with that first error, which wraps broker.ErrStoreFailed; reopening it
// recovers.
type Store struct {
	path     string
	cfg      fileConfig
	readOnly bool
	recovery Recovery    // set by Open, read-only afterwards
	shut     atomic.Bool // set by Close: a Scan in progress stops

	mu     sync.Mutex
	cond   sync.Cond         // on mu: a sync finished, or a syncLocked caller left
	file   storeFile         // the active segment; replaced only by rollLocked, never while flushing
	sealed []segment         // the sealed segments, oldest first
	next   uint64            // the number of the next sealed segment
	st     *state            // what the store knows of its producers
	rr     wire.RecordReader // replay: checks records' metadata
	bufs   bufPool           // the entries Append encodes
	// Offsets are logical: counted over every segment this Store
	// wrote, so that a roll never moves them backwards (syncLocked's
	// callers compare them across a roll). The active segment's byte 0 is
	// at base; its first record entry at body.
	//
	//	base      body          synced       written           end
	//	|--header--|-- entries ---|-- in file ---|--- in pend ---|
	//	                fsynced    not fsynced     encoded, not written (FsyncBatch)
	base, body int64
	end        int64     // after the last entry encoded
	written    int64     // after the last entry written to the file; <= end
	synced     int64     // up to which the store is known fsynced; <= written
	pend       []*[]byte // entries encoded from written to end, in order, for the next commit
	spare      []*[]byte // the other list of the commit (double buffering)
	iov        [][]byte  // the committing goroutine's: pend as pwritev takes it
	flushing   bool      // a goroutine writes or fsyncs with mu released: file stays the active segment
	waiters    int       // goroutines inside syncLocked
	closed     bool
	failed     error // the first write or fsync error; sticky
	stats      storeStats

	closeOnce sync.Once
	closeErr  error
	stop      chan struct{} // closed by Close to stop the maintenance goroutine
	done      chan struct{} // closed by the maintenance goroutine when it exits
}

// State implements broker.Store: the topic's last sequence ID and the
// name's epoch; for a name the store does not know after it forgot some
// (ForgetProducersAfter), the floor and Forgotten. It counts entries whose Append or Fence has written them
// but not returned yet. After Close it returns broker.ErrStoreClosed, after
// a failed write or fsync that failure. Safe for concurrent use.
func (f *Store) State(topic, producer string) (broker.NameState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.usableLocked(); err != nil {
		return broker.NameState{}, err
	}
	epoch, unknown := f.st.epochOf(producer)
	return broker.NameState{LastSeq: f.st.streams[stream{topic, producer}].last, Epoch: epoch,
		Forgotten: unknown && f.st.floor > 0}, nil
}

// Fence implements broker.Store: it writes a fence entry, the new epoch of
// the producer name, and returns once it is fsynced, whatever the
// FsyncPolicy (a fence is written once per producer instance: its cost is
// not the records', and a fence lost in a crash would let a fenced
// instance write again). It refuses an epoch not above the stored one
// with an error wrapping broker.ErrFenced, a producer name that is empty
// or longer than 255 bytes, and after Close or a failed write or fsync as
// Append does. Safe for concurrent use.
func (f *Store) Fence(producer string, epoch uint64) error {
	if f.readOnly {
		return ErrReadOnly
	}
	if err := checkName(producer); err != nil {
		return fmt.Errorf("inflight/file: Store.Fence: %w", err)
	}
	buf := f.bufs.get(fenceLen(producer))
	*buf = appendFence((*buf)[:0], producer, epoch)
	size := int64(len(*buf))

	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.admitLocked(size, func() error {
		if stored, _ := f.st.epochOf(producer); epoch <= stored {
			return fmt.Errorf("%w: %q: epoch %d, stored %d", broker.ErrFenced, producer, epoch, stored)
		}
		// Seen: a roll this fence makes must not forget the name.
		f.st.raiseName(producer, 0, f.cfg.now().UnixNano())
		return nil
	})
	if err != nil {
		f.bufs.put(buf)
		return err
	}
	f.st.raiseName(producer, epoch, f.cfg.now().UnixNano())
	if f.cfg.policy == FsyncBatch {
		f.pend = append(f.pend, buf)
		f.end += size
	} else {
		err = f.writeLocked(*buf)
		f.bufs.put(buf)
		f.end = f.written
	}
	if err == nil {
		err = f.syncLocked(f.end)
	}
	return err
}

// Pin keeps producer from being forgotten (ForgetProducersAfter) until a
// matching Unpin: the broker pins the name of every live session, so that
// a producer idle on a live connection (heartbeats only) keeps its epoch
// and last sequence IDs. Unpin counts as activity: the name is kept for
// ForgetProducersAfter from then. Pins are not stored. Safe for
// concurrent use.
func (f *Store) Pin(producer string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.st.names[producer]
	if !ok {
		n.epoch = f.st.floor // as raiseName: a name the store does not know has the floor
	}
	n.pins++
	n.seen = max(n.seen, f.cfg.now().UnixNano())
	f.st.names[producer] = n
}

// Unpin undoes one Pin of producer.
func (f *Store) Unpin(producer string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.st.names[producer]
	if !ok || n.pins == 0 {
		return
	}
	n.pins--
	n.seen = max(n.seen, f.cfg.now().UnixNano())
	f.st.names[producer] = n
}

// usableLocked returns why the store cannot serve a call, or nil.
func (f *Store) usableLocked() error {
	if f.closed {
		return broker.ErrStoreClosed
	}
	if f.failed != nil {
		return f.failed
	}
	return nil
}

// Append implements broker.Store: it writes one entry per producer frame
// (broker.Record.FrameStart), all with one write call, and, under
// FsyncBatch, returns only once they are fsynced (Appends that wait at the
// same time share one fsync). Entries that would take the active segment
// past SegmentBytes roll the store first (larger ones get a segment of
// their own; an Append's entries stay in one segment). Appending no records does nothing.
// Safe for concurrent use.
//
// It returns broker.ErrStoreClosed after Close. It refuses, without writing and
// without harm to the store, an epoch below the (topic, producer)'s (an error
// wrapping broker.ErrFenced), a topic or producer name that is empty or
// longer than 255 bytes, a sequence ID of 0, sequence IDs that do not
// increase, a first not above the (topic, producer)'s last stored sequence
// ID, metadata over the limits of wire.CheckMeta, a Raw that does not parse
// as the wire's records do, and an entry over 1 GiB. A failed write or
// fsync is returned wrapped, and fails every later call.
func (f *Store) Append(topic, producer string, epoch uint64, recs []broker.Record) error {
	if err := f.writeErr(); err != nil || len(recs) == 0 {
		return err
	}
	// Encoded without the lock: the entries do not depend on where they
	// go, and the Appends of different producers encode at the same time.
	// One entry per producer frame (see planEntries): one walk over recs
	// sizes the entries, one encodes them.
	var room [16]entryPart // most Appends carry a few frames
	parts, total, unordered, err := planEntries(room[:0], topic, producer, recs)
	if err != nil {
		return fmt.Errorf("inflight/file: Store.Append: %w", err)
	}
	buf := f.bufs.get(total)
	*buf = (*buf)[:0]
	for _, p := range parts {
		*buf = appendEntry(*buf, topic, producer, recs[p.start:p.end], p.body)
	}
	return f.commit(buf, stream{topic, producer}, epoch, appended{first: recs[0].Seq, last: recs[len(recs)-1].Seq, n: len(recs), most: len(recs), unordered: unordered}, "Append")
}

// AppendFrames is Append for the records of producer frames as the wire
// carries them (broker.FrameAppender): one entry per frame, the entry
// Append writes for the Records of that whole frame (Raw set), byte for
// byte, with the same checks and errors. It refuses, writing nothing of
// the call, a frame whose records block does not hold Count records that
// parse as the wire's (a flags byte, metadata within the wire's limits),
// and a frame whose first sequence ID is not above the last of the frame
// before it (gaps between frames are allowed). Safe for concurrent use.
func (f *Store) AppendFrames(topic, producer string, epoch uint64, frames []broker.Frame) error {
	if err := f.writeErr(); err != nil || len(frames) == 0 {
		return err
	}
	head := entryBodyHead(topic, producer)
	total := 0
	for _, fr := range frames {
		// A record's entry bytes (gap, length, body) are at most two
		// more than its wire bytes (length, body): its length counts
		// the flags byte, whose uvarint may be a byte longer. A record
		// takes two wire bytes at least: a Count above that, or a block
		// over maxEntryBody, is refused below and must not size the
		// buffer.
		if len(fr.Records) <= maxEntryBody {
			total += entryHeaderSize + head + len(fr.Records) + 2*min(max(fr.Count, 0), len(fr.Records)/2)
		}
	}
	w := appended{first: frames[0].FirstSeq}
	buf := f.bufs.get(total)
	*buf = (*buf)[:0]
	for i, fr := range frames {
		if i > 0 && fr.FirstSeq <= w.last && w.unordered == nil {
			w.unordered = fmt.Errorf("sequence ID %d after %d", fr.FirstSeq, w.last)
		}
		var err error
		if *buf, err = appendFrameEntry(*buf, topic, producer, fr); err != nil {
			f.bufs.put(buf)
			return fmt.Errorf("inflight/file: Store.AppendFrames: frame at sequence ID %d: %w", fr.FirstSeq, err)
		}
		w.last = fr.FirstSeq + uint64(fr.Count) - 1
		w.n += fr.Count
		w.most = max(w.most, fr.Count)
	}
	return f.commit(buf, stream{topic, producer}, epoch, w, "AppendFrames")
}

// appended is what an Append or AppendFrames encoded: its records' first
// and last sequence IDs, their count, the most one entry may hold (an
// Append's count, a frame's), and the first pair out of order found while
// encoding, if any (checkLocked reports it).
type appended struct {
	first, last uint64
	n, most     int
	unordered   error
}

// commit writes buf, the encoded entries of w for k, under f.mu after the
// checks (admitLocked, checkLocked): at once under FsyncNone and
// FsyncInterval, or with the next commit under FsyncBatch, waiting for it.
// It takes buf back to the pool.
func (f *Store) commit(buf *[]byte, k stream, epoch uint64, w appended, op string) error {
	size := int64(len(*buf))
	f.mu.Lock()
	defer f.mu.Unlock()
	// The check marks the name seen: a roll this Append makes must not
	// forget it.
	check := func() error {
		if err := f.checkLocked(k, epoch, w, op); err != nil {
			return err
		}
		f.st.raiseName(k.producer, 0, f.cfg.now().UnixNano())
		return nil
	}
	if err := f.admitLocked(size, check); err != nil {
		f.bufs.put(buf)
		return err
	}
	f.stats.appends.Add(1)
	f.stats.records.Add(uint64(w.n))
	f.st.raiseStream(k, w.last, f.cfg.now().UnixNano())
	if f.cfg.policy == FsyncBatch {
		// For the next commit, which writes and fsyncs it with whatever
		// else was encoded meanwhile.
		f.pend = append(f.pend, buf)
		f.end += size
		return f.syncLocked(f.end)
	}
	err := f.writeLocked(*buf)
	f.bufs.put(buf)
	f.end = f.written
	return err
}

// writeErr returns why an Append or AppendFrames may not write: the store
// is closed or failed (usableLocked), or read-only; nil if it may.
func (f *Store) writeErr() error {
	f.mu.Lock()
	err := f.usableLocked()
	f.mu.Unlock()
	if err == nil && f.readOnly {
		return ErrReadOnly
	}
	return err
}

// entryPart is the records of one entry an Append writes, recs[start:end],
// and the size of its body.
type entryPart struct{ start, end, body int }

// planEntries splits recs into the entries an Append writes, sizes their
// bodies and appends them to parts, in one walk: one entry per producer
// frame, as broker.Record.FrameStart marks them, so that a checksum covers
// at most one frame and a flipped bit costs at most that frame's records
// (a group commit may hand over many frames at once); records that did not
// come from frames (no FrameStart after the first) make one entry. It
// returns the entries' total size, headers included, or an error for
// metadata over a limit or a body over maxEntryBody. A sequence ID not
// above the one before it is no error here: it returns the first as
// unordered, for checkLocked to report after the checks that need the
// store's state.
func planEntries(parts []entryPart, topic, producer string, recs []broker.Record) (_ []entryPart, total int, unordered, err error) {
	head := int64(entryBodyHead(topic, producer))
	start, body := 0, head
	for i := range recs {
		r := &recs[i]
		if i > 0 && r.Seq <= recs[i-1].Seq && unordered == nil {
			unordered = fmt.Errorf("sequence ID %d after %d", r.Seq, recs[i-1].Seq)
		}
		if i > 0 && r.FrameStart {
			parts = append(parts, entryPart{start, i, int(body)})
			total += entryHeaderSize + int(body)
			start, body = i, head
		}
		// The sequence IDs between r and the entry's record before it, as
		// appendEntry writes it: wrapped around for records out of order,
		// whose Append fails, so that the size is always exact.
		gap := uint64(0)
		if i > start {
			gap = r.Seq - recs[i-1].Seq - 1
		}
		n := len(r.Raw)
		if r.Raw != nil {
			if err := checkRaw(r.Raw); err != nil {
				return parts, 0, nil, fmt.Errorf("record %d: %w", r.Seq, err)
			}
		} else {
			meta, err := wire.CheckMeta(r.Key, r.Headers, r.EventTime)
			if err != nil {
				return parts, 0, nil, fmt.Errorf("record %d: %w", r.Seq, err)
			}
			n = 1 + meta + len(r.Payload)
		}
		if body += int64(uvarintLen(gap) + uvarintLen(uint64(n)) + n); body > maxEntryBody {
			end := i + 1 // the entry's records, counted to its end
			for end < len(recs) && !recs[end].FrameStart {
				end++
			}
			return parts, 0, nil, fmt.Errorf("entry of %d records over %d bytes", end-start, maxEntryBody)
		}
	}
	if len(recs) > 0 {
		parts = append(parts, entryPart{start, len(recs), int(body)})
		total += entryHeaderSize + int(body)
	}
	return parts, total, unordered, nil
}

// admitLocked checks an entry of size bytes with check before it is
// written: the store usable, check (the entry's names, sequence IDs and
// epoch) passing, and room in the active segment, which it rolls if there
// is none.
func (f *Store) admitLocked(size int64, check func() error) error {
	if err := f.usableLocked(); err != nil {
		return err
	}
	if err := check(); err != nil {
		return err
	}
	if !f.mustRollLocked(size) {
		return nil
	}
	if err := f.rollLocked(size); err != nil {
		return err
	}
	// The roll may have waited for a commit, letting other calls in: they
	// may have written this stream meanwhile.
	return check()
}

// writeLocked writes buf at the end of the file, under f.mu. A failure is
// sticky: a part of buf may be in the file, and later entries would follow
// garbage; reopening cuts the torn entry off.
func (f *Store) writeLocked(buf []byte) error {
	if _, err := f.file.WriteAt(buf, f.written-f.base); err != nil {
		f.failed = fmt.Errorf("%w: append at offset %d of %s: %w", broker.ErrStoreFailed, f.written-f.base, f.path, err)
		return f.failed
	}
	f.written += int64(len(buf))
	f.stats.writes.Add(1)
	return nil
}

// checkLocked validates an Append's (or AppendFrames') names, epoch and
// sequence IDs.
func (f *Store) checkLocked(k stream, epoch uint64, w appended, op string) error {
	if err := checkNames(k); err != nil {
		return fmt.Errorf("inflight/file: Store.%s: %w", op, err)
	}
	if stored, _ := f.st.epochOf(k.producer); epoch < stored {
		return fmt.Errorf("inflight/file: Store.%s: %w: %q/%q: epoch %d, stored %d", op, broker.ErrFenced, k.topic, k.producer, epoch, stored)
	}
	last := f.st.streams[k].last
	var err error
	switch {
	case uint64(w.most) > math.MaxUint32:
		err = fmt.Errorf("%d records in one entry", w.most)
	case w.first == 0:
		err = errors.New("sequence ID 0")
	case w.first <= last:
		err = fmt.Errorf("%q/%q first sequence ID %d not above the last stored %d", k.topic, k.producer, w.first, last)
	}
	if err == nil {
		err = w.unordered
	}
	if err != nil {
		return fmt.Errorf("inflight/file: Store.%s: %w", op, err)
	}
	return nil
}

// checkNames validates an entry's topic and producer name.
func checkNames(k stream) error {
	if len(k.topic) == 0 || len(k.topic) > maxNameLen {
		return fmt.Errorf("topic of %d bytes, want 1 to %d", len(k.topic), maxNameLen)
	}
	return checkName(k.producer)
}

// checkName validates a producer name.
func checkName(producer string) error {
	if len(producer) == 0 || len(producer) > maxNameLen {
		return fmt.Errorf("producer name of %d bytes, want 1 to %d", len(producer), maxNameLen)
	}
	return nil
}

// Close fsyncs and closes the active segment, after waiting for the Appends
// that are waiting for an fsync and stopping the maintenance goroutine
// (FsyncInterval, RetainAge). Later
// calls do nothing and return nil. Safe for concurrent use.
func (f *Store) Close() error {
	var first bool
	f.closeOnce.Do(func() {
		first = true
		f.shut.Store(true)
		f.mu.Lock()
		f.closed = true
		for f.waiters > 0 {
			f.cond.Wait()
		}
		f.mu.Unlock()
		if f.stop != nil {
			close(f.stop)
			<-f.done
		}
		// Nothing else writes the file now.
		if !f.readOnly {
			if err := f.file.Sync(); err != nil {
				f.closeErr = fmt.Errorf("inflight/file: store close: %w", err)
			}
		}
		if err := f.file.Close(); err != nil && f.closeErr == nil {
			f.closeErr = fmt.Errorf("inflight/file: store close: %w", err)
		}
	})
	if !first {
		return nil
	}
	return f.closeErr
}

// Stats counts a Store's work since Open.
type Stats struct {
	Appends uint64 // Append and AppendFrames calls that stored records
	Records uint64 // records they stored
	// Writes counts the writes to the active segment: one per Append or
	// AppendFrames under FsyncNone and FsyncInterval, one per commit under
	// FsyncBatch.
	Writes uint64
	// Syncs counts the fsyncs of the active segment: commits (FsyncBatch),
	// ticks (FsyncInterval) and rolls. Records/Syncs is how many records
	// one fsync made durable.
	Syncs uint64
}

type storeStats struct{ appends, records, writes, syncs atomic.Uint64 }

// Stats returns the store's counters. Safe for concurrent use.
func (f *Store) Stats() Stats {
	return Stats{Appends: f.stats.appends.Load(), Records: f.stats.records.Load(),
		Writes: f.stats.writes.Load(), Syncs: f.stats.syncs.Load()}
}
