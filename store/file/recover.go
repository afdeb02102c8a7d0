package file

// Telling a torn tail from corruption, and repairing corruption to a side
// file. The rule (RocksDB's kTolerateCorruptedTailRecords and etcd's WAL
// decide the same way): bytes that cannot be read from some point to the
// end of the file, with no intact entry after them, are a torn tail, and
// are cut. Nothing there was acknowledged: an acknowledged entry is
// complete and fsynced, and has only intact entries after it (an entry
// written after it is acknowledged only once fsynced too, which makes
// everything before it durable). An unreadable region followed by an
// intact entry is corruption: Open refuses the file, and with the Repair
// option moves everything from the damage on to a side file; no byte is
// ever deleted.
//
// One exception, which a crash also leaves: writes not yet fsynced reach
// the disk in any order, a page at a time, so a write of several entries
// may leave a later entry intact after a page that never got there and
// reads as zeros. An unreadable region holding a page of zeros (at least
// an entry header's worth of zero bytes up to a 4 KiB boundary of the
// file) before the intact entry is taken as that: nothing from it on was
// acknowledged, but, since bytes that a flipped bit made unreadable may
// look the same, it goes to a side file as a repair does, without the
// Repair option, rather than being cut.
//
//	| header | e1 | e2 | e3 (torn: its length runs past the end) |   -> cut e3
//	| header | e1 | e2 | e3 (bad crc, nothing intact after it)  |   -> cut e3
//	| header | e1 | e2 | zeros to 4 KiB | e4 |                      -> e2.. to a side file
//	| header | e1 | e2 (bad crc) | e3 | e4 |                        -> refused, or e2.. to a side file
//	| header | e1 | e2 (length damaged, body intact to the end) |    -> refused, or e2 to a side file

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/inflightmq/inflight/wire/crc32c"
)

// CorruptError says where a store segment is damaged. It wraps ErrCorrupt.
type CorruptError struct {
	Path   string // the segment file
	Offset int64  // where the first bad entry starts
	Bytes  int64  // bytes from Offset to the end of the segment, which may hold acknowledged records
	Why    string // what is wrong there
	Sealed bool   // a sealed segment (found by Scan or Verify): Repair does not apply to it
	// Next is, for ScanSkipDamaged, where the reading goes on in the same
	// segment: the first intact entry after the damage (Next-Offset bytes
	// are skipped; an entry holds at most one producer frame); 0 if none
	// (the rest of the segment is skipped).
	Next int64
}

// Error says "corrupt", where, and how many bytes follow.
func (e *CorruptError) Error() string {
	hint := "repair moves them to a side file"
	if e.Sealed {
		hint = "a sealed segment: the records before the damage read back, the rest stays as it is"
	}
	return fmt.Sprintf("inflight/file: store file corrupt: %s: bad entry at offset %d (%s); %d bytes from there to the end may hold acknowledged records, not cut: %s",
		e.Path, e.Offset, e.Why, e.Bytes, hint)
}

// Unwrap returns ErrCorrupt.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// tailKind says what kind of bad entry ended a replay.
type tailKind int

const (
	tailOther      tailKind = iota // bad crc, implausible length, malformed body
	tailTornHeader                 // fewer bytes left than an entry header
	tailPastEnd                    // a plausible length that runs past the end of the file
)

// tailVerdict is what tornTail makes of the damage at the end of a
// segment's good entries.
type tailVerdict int

const (
	tailTorn    tailVerdict = iota // cut it
	tailHole                       // a crash's missing page before intact entries: to a side file
	tailCorrupt                    // refused (or repaired with Repair)
)

// holePage is the granularity at which writes reach the disk, for telling
// a crash's missing page (see the top of this file).
const holePage = 4 << 10

// tornTail applies the rule at the top of this file to the bad entry at
// off, of the given kind, and everything after it up to size. For
// tailCorrupt it says why.
func tornTail(file io.ReaderAt, off, size int64, kind tailKind, why string) (tailVerdict, string, error) {
	zero, err := allZero(file, off, size)
	if err != nil || zero {
		return tailTorn, "", err
	}
	if kind != tailTornHeader && size-off > entryHeaderSize {
		// An implausible length or one past the end: a torn write, unless
		// the length itself is what is damaged and the entry is complete
		// (its crc checks out over the bytes that are there): an intact
		// entry after all.
		var hdr [entryHeaderSize]byte
		if _, err := file.ReadAt(hdr[:], off); err != nil {
			return tailCorrupt, "", err
		}
		crc, err := crcOf(file, off+entryHeaderSize, size)
		if err != nil {
			return tailCorrupt, "", err
		}
		if crc == binary.BigEndian.Uint32(hdr[4:]) {
			return tailCorrupt, "its length is damaged: the entry ends at the end of the file", nil
		}
	}
	next, err := findEntry(file, off+1, size)
	if err != nil || next < 0 {
		return tailTorn, "", err
	}
	hole, err := hasZeroPage(file, off, next)
	if err != nil {
		return tailCorrupt, "", err
	}
	if hole {
		return tailHole, "", nil
	}
	return tailCorrupt, why + "; a valid entry follows at offset " + strconv.FormatInt(next, 10), nil
}

// hasZeroPage reports whether the bytes [from, to) of file hold a run of at
// least entryHeaderSize zeros that ends at a multiple of holePage (or at
// to, if that is one).
func hasZeroPage(file io.ReaderAt, from, to int64) (bool, error) {
	for end := (from/holePage + 1) * holePage; end <= to; end += holePage {
		start := max(from, end-entryHeaderSize)
		if end-start < entryHeaderSize {
			continue
		}
		zero, err := allZero(file, start, end)
		if err != nil || zero {
			return zero, err
		}
	}
	return false, nil
}

// allZero reports whether the bytes [from, to) of file are all zero.
func allZero(file io.ReaderAt, from, to int64) (bool, error) {
	buf := make([]byte, 64<<10)
	for from < to {
		n := int(min(int64(len(buf)), to-from))
		if _, err := file.ReadAt(buf[:n], from); err != nil {
			return false, err
		}
		if bytes.ContainsFunc(buf[:n], func(r rune) bool { return r != 0 }) {
			return false, nil
		}
		from += int64(n)
	}
	return true, nil
}

// crcOf returns the CRC-32C of the bytes [from, to) of file.
func crcOf(file io.ReaderAt, from, to int64) (uint32, error) {
	var w crcWriter
	if _, err := io.Copy(&w, io.NewSectionReader(file, from, to-from)); err != nil {
		return 0, err
	}
	return uint32(w), nil
}

// crcWriter is the running CRC-32C of the bytes written to it.
type crcWriter uint32

func (w *crcWriter) Write(p []byte) (int, error) {
	*w = crcWriter(crc32c.Update(uint32(*w), p))
	return len(p), nil
}

// findEntry returns the offset of the first entry at or after from whose
// length fits before size and whose crc checks out, or -1. It looks at every
// offset: only a damaged file gets here, and then only once.
func findEntry(file io.ReaderAt, from, size int64) (int64, error) {
	const window = 1 << 20
	buf := make([]byte, window)
	for start := from; start+entryHeaderSize+minEntryBody <= size; start += window - entryHeaderSize {
		n := int(min(window, size-start))
		if _, err := file.ReadAt(buf[:n], start); err != nil {
			return -1, err
		}
		for i := 0; i+entryHeaderSize <= n && i < window-entryHeaderSize; i++ {
			off := start + int64(i)
			bodyLen := int64(binary.BigEndian.Uint32(buf[i:]))
			if bodyLen < minEntryBody || bodyLen > maxEntryBody || off+entryHeaderSize+bodyLen > size {
				continue
			}
			want := binary.BigEndian.Uint32(buf[i+4:])
			var crc uint32
			if end := i + entryHeaderSize + int(bodyLen); end <= n {
				crc = crc32c.Checksum(buf[i+entryHeaderSize : end])
			} else {
				var err error
				if crc, err = crcOf(file, off+entryHeaderSize, off+entryHeaderSize+bodyLen); err != nil {
					return -1, err
				}
			}
			if crc == want {
				return off, nil
			}
		}
	}
	return -1, nil
}

// repairTail copies the bytes [off, size) of the store's file to a new side
// file next to it (path.corrupt-OFFSET, or with a further .N if that
// exists), fsyncs it and its directory, and only then cuts the store file at
// off. It returns the side file's path.
func (f *Store) repairTail(off, size int64) (string, error) {
	var side *os.File
	var name string
	for i := 0; ; i++ {
		name = f.path + ".corrupt-" + strconv.FormatInt(off, 10)
		if i > 0 {
			name += "." + strconv.Itoa(i)
		}
		var err error
		side, err = f.cfg.fs.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) || i == 1000 {
			return "", fmt.Errorf("inflight/file: repair: %w", err)
		}
	}
	var out storeFile = osFile{side}
	if f.cfg.wrap != nil {
		out = f.cfg.wrap(out) // tests: recorded as the store's writes are
	}
	_, err := io.Copy(io.NewOffsetWriter(out, 0), io.NewSectionReader(f.file, off, size-off))
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = f.cfg.fs.SyncDir(filepath.Dir(name))
	}
	if err != nil {
		_ = f.cfg.fs.Remove(name) // incomplete: the store file still has every byte
		return "", fmt.Errorf("inflight/file: repair: write %s: %w", name, err)
	}
	if err := f.file.Truncate(off); err != nil {
		return "", fmt.Errorf("inflight/file: repair: cut %s at %d (its tail is safe in %s): %w", f.path, off, name, err)
	}
	return name, nil
}
