package file

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"sync"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/wire"
	"github.com/inflightmq/inflight/wire/crc32c"
)

// The segment format. A segment file, all integers big-endian:
//
//	+------+---------+-----------------+-----------------+-----
//	| IFLT | u32 = 6 |     entry 1     |     entry 2     | ...     a store that never rolled
//	+------+---------+-----------------+-----------------+-----
//	| IFLT | u32 = 7 | snapshot entry  |     entry 2     | ...     a segment a roll created
//	+------+---------+-----------------+-----------------+-----
//	 0      4         8
//
//	entry:
//	+-------------+-------------+------------------------------------+
//	| u32 bodyLen | u32 crc32c  |                body                |
//	+-------------+-------------+------------------------------------+
//	                 of body
//	body of a record entry (the layouts of every version's entries, and
//	of fence entries, are drawn below; those of snapshots in state.go):
//	+------+-------------+-------+------------+------+--------------+-----------+-------------------+
//	| u8 0 | u8 topicLen | topic | u8 nameLen | name | u64 firstSeq | u32 count | count x record    |
//	+------+-------------+-------+------------+------+--------------+-----------+-------------------+
//	record: uvarint seq gap | uvarint len | flags, key, headers, event time, payload (as on the wire)
//
// A record entry holds the records of one producer frame of an Append (see
// broker.Record.FrameStart; records that did not come from frames make
// one entry), so that a flipped bit costs one frame's records: one
// (topic, producer), increasing sequence IDs. A fence entry holds one
// Fence: a producer name's new epoch, which replay reads, and which Scan
// and Verify check and skip.

// appendHeader appends a segment's header: the magic and the format
// version.
func appendHeader(dst []byte, version uint32) []byte {
	return binary.BigEndian.AppendUint32(append(dst, fileMagic...), version)
}

// segmentVersion reads and checks a segment's header and returns its format
// version: an ErrCorrupt for a file too short to hold one, another magic or
// a version this inflight does not read; a read error as it is.
func segmentVersion(file io.ReaderAt, size int64) (uint32, error) {
	if size < fileHeaderSize {
		return 0, fmt.Errorf("%w: %d bytes, not a store file", ErrCorrupt, size)
	}
	var have [fileHeaderSize]byte
	if _, err := file.ReadAt(have[:], 0); err != nil {
		return 0, err
	}
	if string(have[:len(fileMagic)]) != fileMagic {
		return 0, fmt.Errorf("%w: magic %q, not a store file", ErrCorrupt, have[:len(fileMagic)])
	}
	v := binary.BigEndian.Uint32(have[len(fileMagic):])
	if v < 1 || v > rolledVersion {
		return 0, fmt.Errorf("%w: format version %d, this inflight reads 1 to %d (written by a newer inflight?)", ErrCorrupt, v, rolledVersion)
	}
	return v, nil
}

// rolled reports whether a segment of format version v was created by a
// roll: its first entry is a snapshot, and version 1 bodies never occur in
// it.
func rolled(v uint32) bool { return v == rolledV3 || v == rolledV5 || v == rolledVersion }

// upgrade returns the version a writer's active segment of version v is
// rewritten to when the store opens (v itself when it is current).
func upgrade(v uint32) uint32 {
	if rolled(v) {
		return rolledVersion
	}
	return fileVersion
}

// File layout constants.
//
// Format versions: 1 (no topics, no metadata), 2 (topics and metadata), 3
// (2 with segments: a rolled segment starts with a snapshot), 4 and 5 (2
// and 3 with fence entries per (topic, producer) and epochs in snapshots),
// 6 and 7 (4 and 5 with epochs per producer name: name fence entries, and
// snapshots with names and the store's epoch counter). A writer upgrades
// the active segment's header to 6 or 7 when it opens the store (see
// Store.load), before it could write an entry of the new kinds, so that an
// older inflight refuses the file instead of misreading one as damage.
// Sealed segments keep the version they were written with.
const (
	fileMagic        = "IFLT"
	fileVersion      = 6 // the active segment of a store that never rolled (upgraded from 1, 2 and 4 on open)
	rolledV3         = 3 // a segment created by a roll before epochs: its snapshot has none
	rolledV5         = 5 // a segment created by a roll before name epochs: epochs per (topic, producer)
	rolledVersion    = 7 // a segment created by a roll (upgraded from 3 and 5 on open): entries after a snapshot
	fenceVersion     = 4 // the first version whose segments may hold fence entries (per topic)
	nameFenceVersion = 6 // the first version whose segments may hold name fence entries
	fileHeaderSize   = 8 // magic, version
	entryHeaderSize  = 8 // bodyLen, crc
	// minEntryBody is the smallest valid body: a snapshot of no streams
	// (kind, time, count; a version 1 body with a 1-byte name, firstSeq,
	// count and one empty record is 15 bytes, a version 2 body more, a
	// fence entry 13 or more). It also rejects the all-zero header that a
	// crash can leave behind, whose CRC (of nothing) is a valid 0.
	minEntryBody = 1 + 8 + 4
	// maxEntryBody bounds one entry. Replay treats a larger bodyLen as
	// corrupt; Append refuses to write one.
	maxEntryBody = 1 << 30
	// maxKeptBuf is the largest entry buffer kept for reuse after Append.
	maxKeptBuf = 8 << 20
	// maxNameLen is the longest producer name or topic an entry can carry.
	maxNameLen = math.MaxUint8
	// entryV2 is the first byte of a version 2 body (a record entry, whose
	// next byte is its topic's length, never 0) and of a control entry
	// (whose next byte is 0). A version 1 body starts with its name's
	// length, never 0, so one file can hold all three.
	entryV2 = 0
	// entrySnapshot is the first byte of a snapshot body without epochs,
	// the first entry of every version 3 segment (where version 1 bodies
	// never occur); entrySnapshotEpochs that of a snapshot with epochs per
	// (topic, producer), the first entry of version 5 segments;
	// entrySnapshotNames that of a snapshot with epochs per name, the first
	// entry of the version 7 segments a roll creates.
	entrySnapshot       = 1
	entrySnapshotEpochs = 2
	entrySnapshotNames  = 3
	// The kinds of control entries, the third byte of their body:
	// controlFence, a (topic, producer)'s new epoch (versions 4 and 5;
	// read as the name's); controlNameFence, a name's new epoch (from
	// version 6).
	controlFence     = 1
	controlNameFence = 2
)

// entryReader reads entries sequentially from after the file header up to
// end, through a bufio.Reader, into one reused body buffer.
type entryReader struct {
	r    *bufio.Reader
	off  int64 // offset of the next entry
	end  int64
	body []byte
}

// badEntryError is an entry that is torn, implausible or fails its CRC.
type badEntryError struct {
	off  int64
	why  string
	kind tailKind
}

func (e *badEntryError) Error() string {
	return "bad entry at offset " + strconv.FormatInt(e.off, 10) + ": " + e.why
}

func newEntryReader(file io.ReaderAt, end int64) *entryReader {
	return newEntryReaderAt(file, fileHeaderSize, end)
}

// newEntryReaderAt reads entries from the entry at from.
func newEntryReaderAt(file io.ReaderAt, from, end int64) *entryReader {
	sr := io.NewSectionReader(file, from, end-from)
	return &entryReader{r: bufio.NewReaderSize(sr, 64<<10), off: from, end: end}
}

// next returns the body of the next entry, checked against its CRC and
// valid until the next call; io.EOF at a clean end; a *badEntryError for a
// bad entry; or the read error.
func (er *entryReader) next() ([]byte, error) {
	var hdr [entryHeaderSize]byte
	switch _, err := io.ReadFull(er.r, hdr[:]); err {
	case nil:
	case io.EOF:
		return nil, io.EOF
	case io.ErrUnexpectedEOF:
		return nil, &badEntryError{er.off, "torn header", tailTornHeader}
	default:
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	switch {
	case n < minEntryBody || n > maxEntryBody:
		return nil, &badEntryError{er.off, "implausible length " + strconv.FormatUint(uint64(n), 10), tailOther}
	case int64(n) > er.end-er.off-entryHeaderSize:
		// Checked before allocating: a corrupt length cannot cost memory
		// beyond the file's size.
		return nil, &badEntryError{er.off, "length runs past the end of the file", tailPastEnd}
	}
	er.body = slices.Grow(er.body[:0], int(n))[:n]
	if _, err := io.ReadFull(er.r, er.body); err != nil {
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			return nil, &badEntryError{er.off, "torn body", tailPastEnd}
		}
		return nil, err
	}
	if crc32c.Checksum(er.body) != binary.BigEndian.Uint32(hdr[4:]) {
		return nil, &badEntryError{er.off, "checksum mismatch", tailOther}
	}
	er.off += entryHeaderSize + int64(n)
	return er.body, nil
}

// entry is a parsed entry body; its slices alias the body.
type entry struct {
	v2    bool
	topic []byte // wire.DefaultTopic for a version 1 entry
	name  []byte
	first uint64 // sequence ID of the first record
	last  uint64 // sequence ID of the last record
	count uint32
	recs  []byte // records not yet returned by nextRecord
	seq   uint64 // sequence ID of the record nextRecord returned last
}

// The body of an entry, all integers big-endian. Version 1 (written by
// inflight before topics and metadata; still read):
//
//	| u8 nameLen | name | u64 firstSeq | u32 count | count x (uvarint len | payload) |
//
// Version 2; gap is seq - previous seq - 1 (0 for the first record, whose
// seq is firstSeq), and rec is a record as wire.AppendRecordBody writes it
// (flags byte, key, headers, event time, payload):
//
//	| u8 0 | u8 topicLen | topic | u8 nameLen | name | u64 firstSeq | u32 count |
//	  count x (uvarint gap | uvarint len | rec) |
//
// A fence entry records a producer name's new epoch (Store.Fence writes
// one). It starts as a record entry whose topic is empty, which no record
// entry has, then says its kind. Versions 4 and 5 wrote one per (topic,
// producer) (kind 1), which is read as the name's epoch; from version 6 it
// is the name's (kind 2):
//
//	| u8 0 | u8 0 | u8 1 | u8 topicLen | topic | u8 nameLen | name | u64 epoch |
//	| u8 0 | u8 0 | u8 2 | u8 nameLen | name | u64 epoch |
var defaultTopic = []byte(wire.DefaultTopic)

// isControl reports whether body is a control entry (a fence entry).
func isControl(body []byte) bool { return len(body) > 1 && body[0] == entryV2 && body[1] == 0 }

// fenceEntry is a parsed fence entry; its name aliases the body.
type fenceEntry struct {
	name  []byte
	epoch uint64
}

// parseFence parses and validates a control entry's body of a segment of
// version v.
func parseFence(body []byte, v uint32) (fenceEntry, error) {
	if !isControl(body) || len(body) < 3 {
		return fenceEntry{}, errors.New("unknown control entry")
	}
	var e fenceEntry
	var err error
	p := body[3:]
	switch {
	case body[2] == controlFence && v >= fenceVersion:
		if _, p, err = shortString(p, "topic"); err != nil {
			return fenceEntry{}, err
		}
	case body[2] == controlNameFence && v >= nameFenceVersion:
	case body[2] == controlFence || body[2] == controlNameFence:
		return fenceEntry{}, errors.New("a fence entry of kind " + strconv.Itoa(int(body[2])) + " in a segment of version " + strconv.FormatUint(uint64(v), 10))
	default:
		return fenceEntry{}, errors.New("unknown control entry")
	}
	if e.name, p, err = shortString(p, "name"); err != nil {
		return fenceEntry{}, err
	}
	if len(p) != 8 {
		return fenceEntry{}, errors.New("fence entry of a bad length")
	}
	if e.epoch = binary.BigEndian.Uint64(p); e.epoch == 0 {
		return fenceEntry{}, errors.New("fence entry of epoch 0")
	}
	return e, nil
}

// fenceLen is the size of a name fence entry (header and body).
func fenceLen(producer string) int {
	return entryHeaderSize + 3 + 1 + len(producer) + 8
}

// appendFence appends a name fence entry (header and body) to buf.
func appendFence(buf []byte, producer string, epoch uint64) []byte {
	start := len(buf)
	buf = append(buf, make([]byte, entryHeaderSize)...)
	buf = append(buf, entryV2, 0, controlNameFence, byte(len(producer)))
	buf = append(buf, producer...)
	buf = binary.BigEndian.AppendUint64(buf, epoch)
	body := buf[start+entryHeaderSize:]
	binary.BigEndian.PutUint32(buf[start:], uint32(len(body)))
	binary.BigEndian.PutUint32(buf[start+4:], crc32c.Checksum(body))
	return buf
}

// parseEntry parses and fully validates a body, records included (rr reads
// their metadata; its headers are reset).
func parseEntry(body []byte, rr *wire.RecordReader) (entry, error) {
	var e entry
	p := body
	if len(p) > 0 && p[0] == entryV2 {
		e.v2 = true
		var err error
		if e.topic, p, err = shortString(p[1:], "topic"); err != nil {
			return entry{}, err
		}
	} else {
		e.topic = defaultTopic
	}
	var err error
	if e.name, p, err = shortString(p, "name"); err != nil {
		return entry{}, err
	}
	if len(p) < 12 {
		return entry{}, errors.New("short body")
	}
	e.first, e.count, e.recs = binary.BigEndian.Uint64(p), binary.BigEndian.Uint32(p[8:]), p[12:]
	if e.first == 0 || e.count == 0 {
		return entry{}, errors.New("zero first sequence ID or count")
	}
	if !e.v2 {
		if e.first > math.MaxUint64-uint64(e.count-1) {
			return entry{}, errors.New("sequence IDs overflow")
		}
		e.last = e.first + uint64(e.count) - 1
	}
	probe := e
	for range e.count {
		if _, err := probe.next(rr); err != nil {
			return entry{}, err
		}
		rr.Reset()
	}
	if len(probe.recs) != 0 {
		return entry{}, errors.New("bytes after the last record")
	}
	e.last = probe.seq
	return e, nil
}

// shortString reads a u8 length (at least 1) and that many bytes.
func shortString(p []byte, what string) ([]byte, []byte, error) {
	if len(p) < 1 || p[0] == 0 || len(p) < 1+int(p[0]) {
		return nil, nil, errors.New("short body or empty " + what)
	}
	n := 1 + int(p[0])
	return p[1:n:n], p[n:], nil
}

// next reads the next record, checking it.
func (e *entry) next(rr *wire.RecordReader) (broker.Record, error) {
	seq := e.first
	if e.seq != 0 {
		if e.seq == math.MaxUint64 {
			return broker.Record{}, errors.New("sequence IDs overflow")
		}
		seq = e.seq + 1
	}
	p := e.recs
	if e.v2 {
		gap, k := binary.Uvarint(p)
		if k <= 0 || (e.seq == 0 && gap != 0) || gap > math.MaxUint64-seq {
			return broker.Record{}, errors.New("bad sequence gap")
		}
		seq += gap
		p = p[k:]
	}
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(len(p)-k) {
		return broker.Record{}, errors.New("bad record length")
	}
	rec, rest := p[k:k+int(n):k+int(n)], p[k+int(n):]
	r := broker.Record{Seq: seq, Payload: rec}
	if e.v2 {
		w, err := rr.Read(rec)
		if err != nil {
			return broker.Record{}, err
		}
		r = broker.Record{Seq: seq, Payload: w.Payload, Key: w.Key, Headers: w.Headers, EventTime: w.EventTime}
	}
	e.recs, e.seq = rest, seq
	return r, nil
}

// nextRecord returns the next record of an entry that parseEntry accepted.
// Its headers stay valid until rr.Reset.
func (e *entry) nextRecord(rr *wire.RecordReader) broker.Record {
	r, _ := e.next(rr) // checked by parseEntry
	return r
}

// appendEntry appends one version 2 entry (header and body of bodyLen
// bytes, as planEntries sized it) holding recs to buf and returns it.
func appendEntry(buf []byte, topic, producer string, recs []broker.Record, bodyLen int) []byte {
	buf = slices.Grow(buf, entryHeaderSize+bodyLen)
	buf, start := appendEntryHead(buf, topic, producer, recs[0].Seq, len(recs))
	prev := recs[0].Seq - 1
	for i := range recs {
		r := &recs[i]
		buf = binary.AppendUvarint(buf, r.Seq-prev-1)
		if r.Raw != nil { // as it arrived: the entry's record body is the wire's
			buf = binary.AppendUvarint(buf, uint64(len(r.Raw)))
			buf = append(buf, r.Raw...)
		} else {
			meta, _ := wire.CheckMeta(r.Key, r.Headers, r.EventTime) // checked by planEntries
			buf = binary.AppendUvarint(buf, uint64(1+meta+len(r.Payload)))
			buf = wire.AppendRecordBody(buf, r.Payload, r.Key, r.Headers, r.EventTime)
		}
		prev = r.Seq
	}
	return sealEntry(buf, start)
}

// appendEntryHead appends the room of an entry's header and the head of a
// version 2 record entry's body (kind, topic, producer, first sequence ID,
// count), and returns buf and where the entry starts, for sealEntry.
func appendEntryHead(buf []byte, topic, producer string, first uint64, count int) ([]byte, int) {
	start := len(buf)
	buf = append(buf, zeroEntryHeader[:]...)
	buf = append(buf, entryV2, byte(len(topic)))
	buf = append(buf, topic...)
	buf = append(buf, byte(len(producer)))
	buf = append(buf, producer...)
	buf = binary.BigEndian.AppendUint64(buf, first)
	return binary.BigEndian.AppendUint32(buf, uint32(count)), start
}

// sealEntry writes the header of the entry from start to the end of buf:
// its body's length and CRC.
func sealEntry(buf []byte, start int) []byte {
	binary.BigEndian.PutUint32(buf[start:], uint32(len(buf)-start-entryHeaderSize))
	binary.BigEndian.PutUint32(buf[start+4:], crc32c.Checksum(buf[start+entryHeaderSize:]))
	return buf
}

// entryBodyHead is the size of a version 2 record entry's body before its
// records: kind, topic, producer, first sequence ID, count.
func entryBodyHead(topic, producer string) int { return 1 + 1 + len(topic) + 1 + len(producer) + 8 + 4 }

// appendFrameEntry appends the version 2 entry of one producer frame's
// records, as appendEntry writes it for the Records of the whole frame
// (Raw set): consecutive sequence IDs from fr.FirstSeq, each record's gap
// 0 and its body as the wire has it. It returns an error, and buf as it
// was given, if fr.Records does not hold fr.Count records that checkRaw
// accepts, or if the entry would pass maxEntryBody.
func appendFrameEntry(buf []byte, topic, producer string, fr broker.Frame) ([]byte, error) {
	switch {
	case fr.Count < 1 || uint64(fr.Count) > math.MaxUint32:
		return buf, fmt.Errorf("frame of %d records", fr.Count)
	case fr.FirstSeq == 0 || fr.FirstSeq > math.MaxUint64-uint64(fr.Count-1):
		return buf, fmt.Errorf("frame of %d records from sequence ID %d", fr.Count, fr.FirstSeq)
	case len(fr.Records) > maxEntryBody:
		return buf, fmt.Errorf("records block of %d bytes, over %d", len(fr.Records), maxEntryBody)
	}
	it := wire.NewRecordIter(fr.Records, uint32(fr.Count))
	buf, start := appendEntryHead(buf, topic, producer, fr.FirstSeq, fr.Count)
	for raw, ok := it.Next(); ok; raw, ok = it.Next() {
		if err := checkRaw(raw); err != nil {
			return buf[:start], err
		}
		buf = append(buf, 0) // the gap: none within a frame
		buf = binary.AppendUvarint(buf, uint64(len(raw)))
		buf = append(buf, raw...)
	}
	if err := it.Err(); err != nil {
		return buf[:start], err
	}
	if body := len(buf) - start - entryHeaderSize; body > maxEntryBody {
		return buf[:start], fmt.Errorf("entry of %d records over %d bytes", fr.Count, maxEntryBody)
	}
	return sealEntry(buf, start), nil
}

// checkRaw checks a record as the wire carries it (broker.Record.Raw, or
// what wire.RecordIter returns) as replay will read it: a flags byte, and
// metadata that parses within the wire's limits. An entry written with one
// that does not would pass its CRC and yet be damage at the next open. A
// plain record (flags 0) costs a byte's compare; one with metadata is read
// with a pooled RecordReader, which allocates nothing once warm.
func checkRaw(raw []byte) error {
	if len(raw) > 0 && raw[0] == 0 {
		return nil // no metadata: the rest is the payload
	}
	return checkMeta(raw)
}

// checkMeta is checkRaw for a record with metadata, or without a flags
// byte: apart, so that checkRaw inlines.
func checkMeta(raw []byte) error {
	rr := rawReaders.Get().(*wire.RecordReader)
	_, err := rr.Read(raw)
	rr.Reset() // no views into raw are kept
	rawReaders.Put(rr)
	return err
}

// rawReaders holds checkRaw's readers (*wire.RecordReader), with their
// header memory.
var rawReaders = sync.Pool{New: func() any { return new(wire.RecordReader) }}

// zeroEntryHeader is an entry header's room before its fields are known.
var zeroEntryHeader [entryHeaderSize]byte

// uvarintLen is the size of the uvarint encoding of x.
func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// stream names the records of one producer on one topic: the unit of
// sequence IDs.
type stream struct{ topic, producer string }
