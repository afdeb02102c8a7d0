package broker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/inflightmq/inflight/wire"
)

// FileStore is a durable Store: one append-only file, one entry per Append
// call. It is safe for concurrent use. Only one FileStore may have a given
// file open for writing at a time: OpenFileStore takes an exclusive lock
// (flock) on it and fails with ErrLocked if another process, or another
// FileStore of this one, holds it; readers open it with ReadOnly. A
// FileStore must not be copied.
//
// The file, all integers big-endian:
//
//	+------+---------+-----------------+-----------------+-----
//	| IFLT | u32 = 2 |     entry 1     |     entry 2     | ...
//	+------+---------+-----------------+-----------------+-----
//	 0      4         8
//
//	entry:
//	+-------------+-------------+------------------------------------+
//	| u32 bodyLen | u32 crc32c  |                body                |
//	+-------------+-------------+------------------------------------+
//	                 of body
//	body (version 2; the layouts of both versions are drawn in filestore_format.go):
//	+------+-------------+-------+------------+------+--------------+-----------+-------------------+
//	| u8 0 | u8 topicLen | topic | u8 nameLen | name | u64 firstSeq | u32 count | count x record    |
//	+------+-------------+-------+------------+------+--------------+-----------+-------------------+
//	record: uvarint seq gap | uvarint len | flags, key, headers, event time, payload (as on the wire)
//
// An entry holds one Append: one (topic, producer), increasing sequence IDs.
// OpenFileStore replays the file to rebuild each (topic, producer)'s last
// sequence ID. An entry is acknowledged only after it was written whole, so
// the only damage a crash leaves is an incomplete final entry (its length
// runs past the end of the file, no valid entry follows it, and its CRC does
// not check out over the bytes that are there), or zeros from the damage to
// the end: that torn tail is cut (Recovery.TruncatedBytes). Any other damage
// (a CRC mismatch, an implausible length or a malformed body, with or
// without entries after it) may hide acknowledged records: OpenFileStore
// refuses the file with a *CorruptError and leaves it untouched, or with
// Repair moves the damaged remainder to a side file. Nothing ever deletes
// bytes that could hold acknowledged records.
//
// Format versions: a file of version 1 (before topics and metadata) opens;
// its records read as topic wire.DefaultTopic without metadata, and
// OpenFileStore rewrites its header to version 2 (Recovery.UpgradedFrom says
// so), after which an older inflight refuses the file instead of misreading
// it. A version it does not know is refused with ErrCorrupt, file untouched.
//
// Durability follows the FsyncPolicy. After a failed write or fsync the
// state of the file is unknown: the store refuses every later Append and
// LastSeq with that first error, which wraps ErrStoreFailed; reopening it
// recovers.
type FileStore struct {
	path     string
	file     storeFile // set by OpenFileStore, closed by Close, never replaced
	policy   FsyncPolicy
	readOnly bool
	recovery Recovery // set by OpenFileStore, read-only afterwards

	mu      sync.Mutex
	cond    sync.Cond // on mu: a sync finished, or a syncLocked caller left
	last    map[stream]uint64
	rr      wire.RecordReader // Append and replay: checks records' metadata
	buf     []byte            // the entry being built, reused
	end     int64             // offset after the last entry written
	synced  int64             // offset up to which the file is known fsynced
	syncing bool              // a goroutine is in file.Sync with mu released
	waiters int               // goroutines inside syncLocked
	closed  bool
	failed  error // the first write or fsync error; sticky

	closeOnce sync.Once
	closeErr  error
	stop      chan struct{} // FsyncInterval: closed by Close to stop the syncer
	done      chan struct{} // FsyncInterval: closed by the syncer when it exits
}

// OpenFileStore opens the store file at path, creating it (mode 0600, and
// fsyncing its directory) if it does not exist, locks it (ErrLocked if
// another FileStore holds it) and replays it. A torn tail is cut; a corrupt
// file is refused with a *CorruptError unless Repair is given (see
// FileStore and Recovery). A file that does not start with the FileStore
// header is refused with an error wrapping ErrCorrupt and left untouched; an
// empty file, or one holding only the beginning of the header (a creation
// cut short by a crash), is taken as new. Options are validated before the
// file is touched. Everything replayed is fsynced before OpenFileStore
// returns, whatever the policy. With ReadOnly, see that option.
func OpenFileStore(path string, opts ...FileStoreOption) (*FileStore, error) {
	cfg := fileConfig{policy: FsyncBatch, every: 100 * time.Millisecond}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil FileStoreOption", ErrInvalidOption)
		}
		if err := o.applyFile(&cfg); err != nil {
			return nil, err
		}
	}
	created := false
	var file *os.File
	var err error
	if cfg.readOnly {
		file, err = os.Open(path)
	} else {
		created = true
		file, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			created = false
			file, err = os.OpenFile(path, os.O_RDWR, 0)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("inflight/broker: open store: %w", err)
	}
	if !cfg.readOnly {
		// Before anything is read: a second broker must not even cut a torn
		// tail that the first one is still writing.
		if err := lockFile(file); err != nil {
			_ = file.Close()
			return nil, fmt.Errorf("inflight/broker: open store %s: %w", path, err)
		}
	}
	f := &FileStore{path: path, file: file, policy: cfg.policy, readOnly: cfg.readOnly, last: make(map[stream]uint64)}
	if cfg.wrap != nil {
		f.file = cfg.wrap(file)
	}
	f.cond.L = &f.mu
	if err := f.load(created, cfg.repair); err != nil {
		_ = file.Close()
		return nil, err
	}
	if f.readOnly {
		return f, nil
	}
	if f.policy == FsyncInterval {
		f.stop, f.done = make(chan struct{}), make(chan struct{})
		go f.syncEvery(cfg.every)
	}
	return f, nil
}

// load checks or writes the file header, replays the entries, cuts off a
// torn tail (or repairs corruption) and fsyncs.
func (f *FileStore) load(created, repair bool) error {
	st, err := f.file.Stat()
	if err != nil {
		return fmt.Errorf("inflight/broker: open store: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("inflight/broker: open store %s: not a regular file", f.path)
	}
	var header [fileHeaderSize]byte
	copy(header[:], fileMagic)
	binary.BigEndian.PutUint32(header[len(fileMagic):], fileVersion)

	size := st.Size()
	if size < fileHeaderSize {
		have := make([]byte, size)
		if _, err := f.file.ReadAt(have, 0); err != nil {
			return fmt.Errorf("inflight/broker: open store: %w", err)
		}
		if !bytes.HasPrefix(header[:], have) {
			return fmt.Errorf("%w: %s: %d bytes, not a store file", ErrCorrupt, f.path, size)
		}
		if f.readOnly {
			f.end = fileHeaderSize // nothing to read yet
			return nil
		}
		if _, err := f.file.WriteAt(header[:], 0); err != nil {
			return fmt.Errorf("inflight/broker: open store: write header: %w", err)
		}
		if err := f.file.Sync(); err != nil {
			return fmt.Errorf("inflight/broker: open store: %w", err)
		}
		if created {
			if err := syncDir(filepath.Dir(f.path)); err != nil {
				return fmt.Errorf("inflight/broker: open store: %w", err)
			}
		}
		f.end, f.synced = fileHeaderSize, fileHeaderSize
		return nil
	}

	var have [fileHeaderSize]byte
	if _, err := f.file.ReadAt(have[:], 0); err != nil {
		return fmt.Errorf("inflight/broker: open store: %w", err)
	}
	if string(have[:len(fileMagic)]) != fileMagic {
		return fmt.Errorf("%w: %s: magic %q, not a store file", ErrCorrupt, f.path, have[:len(fileMagic)])
	}
	v := binary.BigEndian.Uint32(have[len(fileMagic):])
	if v != fileVersion && v != 1 {
		return fmt.Errorf("%w: %s: format version %d, this inflight reads 1 and %d (written by a newer inflight?)", ErrCorrupt, f.path, v, fileVersion)
	}
	good, bad, err := f.replay(size)
	if err != nil {
		return err
	}
	torn := false
	if bad != nil {
		var why string
		torn, why, err = tornTail(f.file, good, size, bad.kind, bad.why)
		if err != nil {
			return fmt.Errorf("inflight/broker: open store: %w", err)
		}
		if !torn && (!repair || f.readOnly) {
			return &CorruptError{Path: f.path, Offset: good, Bytes: size - good, Why: why}
		}
	}
	if f.readOnly {
		f.end = good // a torn tail may be an Append in progress: not ours to cut
		return nil
	}
	if v == 1 {
		// Its entries stay as they are (version 1 bodies are told apart by
		// their first byte); the header says 2 from now on, so that an older
		// inflight refuses the file instead of cutting off the version 2
		// entries it cannot read as a torn tail.
		if _, err := f.file.WriteAt(header[len(fileMagic):], int64(len(fileMagic))); err != nil {
			return fmt.Errorf("inflight/broker: open store: upgrade the header: %w", err)
		}
		f.recovery.UpgradedFrom = 1
	}
	if good < size {
		if torn {
			if err := f.file.Truncate(good); err != nil {
				return fmt.Errorf("inflight/broker: open store: %s: cannot cut the torn tail at %d: %w", f.path, good, err)
			}
			f.recovery.TruncatedBytes = size - good
		} else {
			side, err := f.repairTail(good, size)
			if err != nil {
				return err
			}
			f.recovery.RepairedBytes, f.recovery.SideFile = size-good, side
		}
	}
	// Make the replayed entries durable: a previous run under FsyncNone may
	// have left them in the page cache only, and LastSeq now vouches for them.
	if err := f.file.Sync(); err != nil {
		return fmt.Errorf("inflight/broker: open store: %w", err)
	}
	f.end, f.synced = good, good
	return nil
}

// replay reads the entries of a file of size bytes and returns the offset
// after the last good one, and the bad entry there if the file does not end
// cleanly. Only a read error is an error.
func (f *FileStore) replay(size int64) (int64, *badEntryError, error) {
	r := newEntryReader(f.file, size)
	for {
		start := r.off
		body, err := r.next()
		if err == io.EOF {
			return start, nil, nil
		}
		if bad, ok := err.(*badEntryError); ok {
			return start, bad, nil
		}
		if err != nil {
			return 0, nil, fmt.Errorf("inflight/broker: open store: replay at %d: %w", start, err)
		}
		e, err := parseEntry(body, &f.rr)
		if err != nil {
			return start, &badEntryError{start, "malformed: " + err.Error(), tailOther}, nil
		}
		k := stream{string(e.topic), string(e.name)}
		if e.last > f.last[k] {
			f.last[k] = e.last
		}
		f.recovery.Entries++
		f.recovery.Records += int(e.count)
	}
}

// Recovery returns what OpenFileStore found. Safe for concurrent use.
func (f *FileStore) Recovery() Recovery { return f.recovery }

// LastSeq implements Store. It counts entries whose Append has written them
// but not returned yet. After Close it returns ErrStoreClosed, after a failed
// write or fsync that failure. Safe for concurrent use.
func (f *FileStore) LastSeq(topic, producer string) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.usableLocked(); err != nil {
		return 0, err
	}
	return f.last[stream{topic, producer}], nil
}

// usableLocked returns why the store cannot serve a call, or nil.
func (f *FileStore) usableLocked() error {
	if f.closed {
		return ErrStoreClosed
	}
	if f.failed != nil {
		return f.failed
	}
	return nil
}

// Append implements Store: it writes one entry with one write call and,
// under FsyncBatch, returns only once the entry is fsynced (Appends that wait
// at the same time share one fsync). Appending no records does nothing.
// Safe for concurrent use.
//
// It returns ErrStoreClosed after Close. It refuses, without writing and
// without harm to the store, a topic or producer name that is empty or longer
// than 255 bytes, a sequence ID of 0, sequence IDs that do not increase, a
// first not above the (topic, producer)'s last stored sequence ID, metadata
// over the limits of wire.CheckMeta, and an entry over 1 GiB. A failed write
// or fsync is returned wrapped, and fails every later Append and LastSeq.
func (f *FileStore) Append(topic, producer string, recs []Record) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.usableLocked(); err != nil {
		return err
	}
	if f.readOnly {
		return ErrReadOnly
	}
	if len(recs) == 0 {
		return nil
	}
	k := stream{topic, producer}
	if err := f.checkLocked(k, recs); err != nil {
		return fmt.Errorf("inflight/broker: FileStore.Append: %w", err)
	}
	bodyLen, err := entryBodyLen(topic, producer, recs)
	if err != nil {
		return fmt.Errorf("inflight/broker: FileStore.Append: %w", err)
	}

	buf := appendEntry(f.buf[:0], topic, producer, recs, bodyLen)
	if cap(buf) <= maxKeptBuf {
		f.buf = buf[:0]
	} else {
		f.buf = nil
	}

	if _, err := f.file.WriteAt(buf, f.end); err != nil {
		// A part of the entry may be in the file: later entries would follow
		// garbage. Stop here; reopening cuts the torn entry off.
		f.failed = fmt.Errorf("%w: append at offset %d: %w", ErrStoreFailed, f.end, err)
		return f.failed
	}
	f.end += int64(len(buf))
	f.last[k] = recs[len(recs)-1].Seq
	if f.policy == FsyncBatch {
		return f.syncLocked(f.end)
	}
	return nil
}

// checkLocked validates Append's names and sequence IDs.
func (f *FileStore) checkLocked(k stream, recs []Record) error {
	switch {
	case len(k.topic) == 0 || len(k.topic) > maxNameLen:
		return fmt.Errorf("topic of %d bytes, want 1 to %d", len(k.topic), maxNameLen)
	case len(k.producer) == 0 || len(k.producer) > maxNameLen:
		return fmt.Errorf("producer name of %d bytes, want 1 to %d", len(k.producer), maxNameLen)
	case uint64(len(recs)) > math.MaxUint32:
		return fmt.Errorf("%d records in one entry", len(recs))
	case recs[0].Seq == 0:
		return errors.New("sequence ID 0")
	}
	if prev := f.last[k]; recs[0].Seq <= prev {
		return fmt.Errorf("%q/%q first sequence ID %d not above the last stored %d", k.topic, k.producer, recs[0].Seq, prev)
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].Seq <= recs[i-1].Seq {
			return fmt.Errorf("sequence ID %d after %d", recs[i].Seq, recs[i-1].Seq)
		}
	}
	return nil
}

// Scan calls fn for every record in the file, from the start, in file order
// (per producer that is sequence order), stopping at fn's first error and
// returning it. It sees the entries written before it started, and holds no
// lock while fn runs: fn may call any method. The record's slices and
// headers are valid only during fn. Records of a version 1 file (see
// Recovery.UpgradedFrom) have the topic wire.DefaultTopic and no metadata. Scan returns ErrStoreClosed after Close, and if Close happens
// during the scan, unless what is left was already read into its buffer.
// It returns an error wrapping ErrCorrupt if an entry no longer checks out.
// Safe for concurrent use.
func (f *FileStore) Scan(fn func(topic, producer string, rec Record) error) error {
	f.mu.Lock()
	closed, end := f.closed, f.end
	f.mu.Unlock()
	if closed {
		return ErrStoreClosed
	}
	r := newEntryReader(f.file, end)
	var rr wire.RecordReader
	topic, name := "", ""
	for {
		start := r.off
		body, err := r.next()
		if err == io.EOF {
			return nil
		}
		if errors.Is(err, os.ErrClosed) {
			return ErrStoreClosed
		}
		if _, bad := err.(*badEntryError); bad {
			return fmt.Errorf("%w: %s: %w", ErrCorrupt, f.path, err)
		}
		if err != nil {
			return fmt.Errorf("inflight/broker: store scan at %d: %w", start, err)
		}
		e, err := parseEntry(body, &rr)
		if err != nil {
			return fmt.Errorf("%w: %s: entry at %d: %w", ErrCorrupt, f.path, start, err)
		}
		if string(e.topic) != topic {
			topic = string(e.topic)
		}
		if string(e.name) != name {
			name = string(e.name)
		}
		for range e.count {
			rr.Reset()
			if err := fn(topic, name, e.nextRecord(&rr)); err != nil {
				return err
			}
		}
	}
}

// Close fsyncs and closes the file, after waiting for the Appends that are
// waiting for an fsync and stopping the FsyncInterval goroutine. Later
// calls do nothing and return nil. Safe for concurrent use.
func (f *FileStore) Close() error {
	var first bool
	f.closeOnce.Do(func() {
		first = true
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
				f.closeErr = fmt.Errorf("inflight/broker: store close: %w", err)
			}
		}
		if err := f.file.Close(); err != nil && f.closeErr == nil {
			f.closeErr = fmt.Errorf("inflight/broker: store close: %w", err)
		}
	})
	if !first {
		return nil
	}
	return f.closeErr
}
