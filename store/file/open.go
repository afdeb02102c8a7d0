package file

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Opening a store: locking it, listing its segments, finishing or undoing
// a roll a crash interrupted, and replaying the active segment (load), which
// cuts a torn tail and refuses, or repairs, corruption (recover.go).

// Open opens the store at path (see Store), creating it (mode
// 0600, and fsyncing its directory) if it does not exist, locks it
// (ErrLocked if another Store holds it), finishes or undoes a roll a
// crash interrupted, replays the active segment and applies retention. A
// torn tail is cut; a corrupt active segment is refused with a
// *CorruptError unless Repair is given (see Store and Recovery). A file
// that does not start with the Store header is refused with an error
// wrapping ErrCorrupt and left untouched; an empty file, one holding only
// the beginning of the header, or a header's worth of zeros (a creation cut
// short by a crash), is taken as new, unless sealed segments exist (then it is refused: a roll writes the
// new segment whole before it takes the name; Repair rebuilds its snapshot
// from them). Options are validated before anything is touched. Everything
// replayed is fsynced before Open returns, whatever the policy.
// With ReadOnly, see that option.
func Open(path string, opts ...Option) (*Store, error) {
	cfg, err := fileOptions(opts)
	if err != nil {
		return nil, err
	}
	f := &Store{path: path, cfg: cfg, readOnly: cfg.readOnly, st: newState()}
	f.cond.L = &f.mu
	var file *os.File
	var created bool
	var sealed []segment
	if f.readOnly {
		file, sealed, err = f.openReader()
	} else {
		file, created, sealed, err = f.openWriter()
	}
	if err != nil {
		return nil, err
	}
	f.file = osFile{file}
	if cfg.wrap != nil {
		f.file = cfg.wrap(f.file)
	}
	f.sealed = sealed
	f.next = 1
	if len(sealed) > 0 {
		f.next = sealed[len(sealed)-1].num + 1
	}
	f.recovery.Sealed = len(sealed)
	if err := f.load(created, cfg.repair); err != nil {
		_ = file.Close()
		return nil, err
	}
	if f.readOnly {
		return f, nil
	}
	// Whether the file was created now or found, nothing proves that its
	// name is durable: a crash after the file's fsync and before its
	// directory's (at a creation, a roll's rename, a repair) leaves a file
	// that is there until the next crash. One fsync of the directory per
	// Open makes it so.
	if err := cfg.fs.SyncDir(filepath.Dir(path)); err != nil {
		_ = file.Close()
		return nil, fmt.Errorf("inflight/file: open store: %w", err)
	}
	f.mu.Lock()
	f.recovery.Removed += f.retainLocked(cfg.now())
	f.mu.Unlock()
	if cfg.policy == FsyncInterval || cfg.retainAge > 0 {
		f.stop, f.done = make(chan struct{}), make(chan struct{})
		go f.maintain()
	}
	return f, nil
}

// openWriter opens (creating it if the store is new) and locks the active
// segment, undoes what a crash left of a roll, and lists the sealed
// segments.
func (f *Store) openWriter() (*os.File, bool, []segment, error) {
	sealed, err := listSealed(f.path) // before the lock: only to know the store is not new
	if err != nil {
		return nil, false, nil, fmt.Errorf("inflight/file: open store: %w", err)
	}
	file, created, err := f.openActive(len(sealed) > 0)
	if err != nil {
		return nil, false, nil, err
	}
	// Under the lock: a roll in progress is no one else's, and only our
	// retention removes segments.
	if err := f.undoRoll(file, sealed); err != nil {
		_ = file.Close()
		return nil, false, nil, err
	}
	if sealed, err = listSealed(f.path); err != nil {
		_ = file.Close()
		return nil, false, nil, fmt.Errorf("inflight/file: open store: %w", err)
	}
	leftover, sealed := retainedPrefix(sealed)
	n, err := f.finishRetention(leftover)
	f.recovery.Removed += n
	if err != nil {
		_ = file.Close()
		return nil, false, nil, err
	}
	return file, created, sealed, nil
}

// openReader opens the active segment for reading and lists the sealed
// segments older than it. A writer may roll meanwhile: the file the reader
// opened may be sealed by then, and is dropped from the list with all that
// follows it, so the reader sees the store as it was when it opened the
// file, each record once. A listing made while the writer's retention
// removes segments may show a hole: it is taken again. If retention removed
// the file itself, the reader opens the new active segment.
func (f *Store) openReader() (*os.File, []segment, error) {
	var lastErr error
	for range 10 {
		file, err := os.Open(f.path)
		if err != nil {
			return nil, nil, fmt.Errorf("inflight/file: open store: %w", err)
		}
		sealed, err := f.sealedBefore(file)
		if err == nil {
			return file, sealed, nil
		}
		_ = file.Close()
		if !errors.Is(err, errRelist) && !errors.Is(err, ErrCorrupt) {
			return nil, nil, fmt.Errorf("inflight/file: open store: %w", err)
		}
		lastErr = err
	}
	if errors.Is(lastErr, errRelist) {
		lastErr = fmt.Errorf("%w: %s: the store changed under every attempt to read it", ErrCorrupt, f.path)
	}
	return nil, nil, fmt.Errorf("inflight/file: open store: %w", lastErr)
}

// errRelist: the file a reader opened is neither the active segment nor a
// sealed one any more.
var errRelist = errors.New("removed while opening")

// sealedBefore lists the sealed segments older than file (see openReader).
func (f *Store) sealedBefore(file *os.File) ([]segment, error) {
	mine, err := file.Stat()
	if err != nil {
		return nil, err
	}
	// PATH first, then the list: a roll links the file before it renames
	// over PATH, so a file that was PATH here is either not sealed in the
	// list (no roll yet: all of it is older) or found in it.
	active, err := os.Stat(f.path)
	stillActive := err == nil && os.SameFile(active, mine)
	sealed, err := listSealed(f.path)
	if err != nil {
		return nil, err
	}
	for i, s := range sealed {
		if st, err := os.Stat(s.path); err == nil && os.SameFile(st, mine) {
			_, kept := retainedPrefix(sealed[:i])
			return kept, nil
		}
	}
	if !stillActive {
		return nil, errRelist // sealed, then removed by retention
	}
	_, kept := retainedPrefix(sealed)
	return kept, nil
}

// openActive opens or creates the active segment of a writer and locks it.
// A store with sealed segments but no active one is refused: a new empty
// one would forget every producer's last sequence ID.
func (f *Store) openActive(haveSealed bool) (*os.File, bool, error) {
	// A roll replaces the file named path. Whoever opened the old one just
	// before may lock it once the roller lets go: then it is a sealed
	// segment, and we try again.
	for range 100 {
		created := true
		file, err := f.cfg.fs.OpenFile(f.path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			created = false
			file, err = f.cfg.fs.OpenFile(f.path, os.O_RDWR, 0)
		}
		if err != nil {
			return nil, false, fmt.Errorf("inflight/file: open store: %w", err)
		}
		if created && haveSealed {
			_ = f.cfg.fs.Remove(f.path)
			_ = file.Close()
			return nil, false, fmt.Errorf("%w: %s: sealed segments but no active segment (moved or deleted?)", ErrCorrupt, f.path)
		}
		// Before anything is read: a second broker must not even cut a
		// torn tail that the first one is still writing.
		if err := lockFile(file); err != nil {
			_ = file.Close()
			return nil, false, fmt.Errorf("inflight/file: open store %s: %w", f.path, err)
		}
		if same, err := isPath(file, f.path); err != nil || same {
			if err != nil {
				_ = file.Close()
				return nil, false, fmt.Errorf("inflight/file: open store: %w", err)
			}
			return file, created, nil
		}
		_ = file.Close()
	}
	return nil, false, fmt.Errorf("inflight/file: open store %s: %w", f.path, ErrLocked)
}

// isPath reports whether file is still the file named path.
func isPath(file *os.File, path string) (bool, error) {
	a, err := file.Stat()
	if err != nil {
		return false, err
	}
	b, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(a, b), nil
}

// load checks or writes the file header, replays the entries, cuts off a
// torn tail (or repairs corruption) and fsyncs.
func (f *Store) load(created, repair bool) error {
	st, err := f.file.Stat()
	if err != nil {
		return fmt.Errorf("inflight/file: open store: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("inflight/file: open store %s: not a regular file", f.path)
	}
	header := appendHeader(nil, fileVersion)
	size := st.Size()
	// A creation cut short: a part of the header, or a header's worth of
	// zeros (the file grew, its page never reached the disk). Nothing was
	// acknowledged: the header is fsynced before the first entry is
	// written, so a crash leaves no more than that.
	have := make([]byte, min(size, fileHeaderSize))
	if _, err := f.file.ReadAt(have, 0); err != nil {
		return fmt.Errorf("inflight/file: open store: %w", err)
	}
	if size < fileHeaderSize || size == fileHeaderSize && bytes.Equal(have, make([]byte, fileHeaderSize)) {
		if !bytes.HasPrefix(header, have) && !bytes.Equal(have, make([]byte, len(have))) {
			return fmt.Errorf("%w: %s: %d bytes, not a store file", ErrCorrupt, f.path, size)
		}
		if len(f.sealed) > 0 {
			// A roll writes the new segment whole before it takes the name:
			// this is outside damage. Taken as new, it would forget every
			// producer's last sequence ID.
			if !repair || f.readOnly {
				return fmt.Errorf("%w: %s: %d bytes, but %d sealed segments: the active segment lost its snapshot (repair rebuilds it from them)",
					ErrCorrupt, f.path, size, len(f.sealed))
			}
			end, err := f.rebuildActive()
			if err != nil {
				return err
			}
			f.end, f.written, f.synced, f.body = end, end, end, end
			f.recovery.RepairedBytes = size // a header's beginning: no record
			return nil
		}
		if f.readOnly {
			f.end, f.written, f.body = fileHeaderSize, fileHeaderSize, fileHeaderSize // nothing to read yet
			return nil
		}
		if _, err := f.file.WriteAt(header, 0); err != nil {
			return fmt.Errorf("inflight/file: open store: write header: %w", err)
		}
		if err := f.file.Sync(); err != nil {
			return fmt.Errorf("inflight/file: open store: %w", err)
		}
		f.end, f.written, f.synced, f.body = fileHeaderSize, fileHeaderSize, fileHeaderSize, fileHeaderSize
		return nil
	}

	v, err := segmentVersion(f.file, size)
	if err != nil {
		return fmt.Errorf("inflight/file: open store: %s: %w", f.path, err)
	}
	// Entries carry no time: their producers count as seen now, the
	// latest they can have appended (ForgetProducersAfter keeps them
	// longer, never shorter, than their last Append says).
	seg, err := replaySegment(f.file, size, v, f.cfg.now().UnixNano(), f.st, &f.rr)
	if err != nil {
		return fmt.Errorf("inflight/file: open store: %s: %w", f.path, err)
	}
	good, bad := seg.good, seg.bad
	f.recovery.Entries, f.recovery.Records = seg.entries, seg.records
	verdict := tailTorn
	if bad != nil {
		var why string
		verdict, why, err = tornTail(f.file, good, size, bad.kind, bad.why)
		if err != nil {
			return fmt.Errorf("inflight/file: open store: %w", err)
		}
		if verdict == tailCorrupt && (!repair || f.readOnly) {
			if !f.readOnly || !f.cfg.readDamaged {
				return &CorruptError{Path: f.path, Offset: good, Bytes: size - good, Why: why}
			}
			good = size // ReadDamaged: Scan reads up to the damage and reports it there
		}
	}
	f.body = seg.body
	if f.readOnly {
		f.end, f.written = good, good // a torn tail may be an Append in progress: not ours to cut
		return nil
	}
	if up := upgrade(v); up != v {
		// Its entries stay as they are (version 1 bodies, version 2 bodies
		// and fence entries are told apart by their first bytes, a version 3
		// snapshot from a version 5 one by its kind); the header says 6 (or
		// 7) from now on, before a fence entry can be written, so that an
		// older inflight refuses the file instead of cutting off, or
		// refusing as damage, the entries it cannot read.
		if _, err := f.file.WriteAt(appendHeader(nil, up)[len(fileMagic):], int64(len(fileMagic))); err != nil {
			return fmt.Errorf("inflight/file: open store: upgrade the header: %w", err)
		}
		f.recovery.UpgradedFrom = int(v)
	}
	if good < size {
		if verdict == tailTorn {
			if err := f.file.Truncate(good); err != nil {
				return fmt.Errorf("inflight/file: open store: %s: cannot cut the torn tail at %d: %w", f.path, good, err)
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
	if rolled(v) && good == fileHeaderSize {
		// Repair took the snapshot: the sealed segments still know every
		// producer's last sequence ID. A new snapshot goes where it was.
		if good, err = f.rebuildActive(); err != nil {
			return err
		}
		f.body = good
	}
	// Make the replayed entries durable: a previous run under FsyncNone may
	// have left them in the page cache only, and State's LastSeq now vouches for them.
	if err := f.file.Sync(); err != nil {
		return fmt.Errorf("inflight/file: open store: %w", err)
	}
	f.end, f.written, f.synced = good, good, good
	return nil
}

// Recovery returns what Open found. Safe for concurrent use.
func (f *Store) Recovery() Recovery { return f.recovery }
