package broker

import (
	"bufio"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math"
	"math/bits"
	"os"
	"slices"
	"strconv"
)

// File layout constants.
const (
	fileMagic       = "IFLT"
	fileVersion     = 1
	fileHeaderSize  = 8 // magic, version
	entryHeaderSize = 8 // bodyLen, crc
	// minEntryBody is the smallest valid body: a 1-byte name, firstSeq,
	// count and one empty record. It also rejects the all-zero header that a
	// crash can leave behind, whose CRC (of nothing) is a valid 0.
	minEntryBody = 1 + 1 + 8 + 4 + 1
	// maxEntryBody bounds one entry. Replay treats a larger bodyLen as
	// corrupt; Append refuses to write one.
	maxEntryBody = 1 << 30
	// maxKeptBuf is the largest entry buffer kept for reuse after Append.
	maxKeptBuf = 8 << 20
	// maxNameLen is the longest producer name an entry can carry.
	maxNameLen = math.MaxUint8
)

// castagnoli is the CRC-32C table, built once (crc32 uses the CPU's CRC32
// instruction for this polynomial where there is one).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

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
	off int64
	why string
}

func (e *badEntryError) Error() string {
	return "bad entry at offset " + strconv.FormatInt(e.off, 10) + ": " + e.why
}

func newEntryReader(file *os.File, end int64) *entryReader {
	sr := io.NewSectionReader(file, fileHeaderSize, end-fileHeaderSize)
	return &entryReader{r: bufio.NewReaderSize(sr, 64<<10), off: fileHeaderSize, end: end}
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
		return nil, &badEntryError{er.off, "torn header"}
	default:
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	switch {
	case n < minEntryBody || n > maxEntryBody:
		return nil, &badEntryError{er.off, "implausible length " + strconv.FormatUint(uint64(n), 10)}
	case int64(n) > er.end-er.off-entryHeaderSize:
		// Checked before allocating: a corrupt length cannot cost memory
		// beyond the file's size.
		return nil, &badEntryError{er.off, "torn body"}
	}
	er.body = slices.Grow(er.body[:0], int(n))[:n]
	if _, err := io.ReadFull(er.r, er.body); err != nil {
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			return nil, &badEntryError{er.off, "torn body"}
		}
		return nil, err
	}
	if crc32.Checksum(er.body, castagnoli) != binary.BigEndian.Uint32(hdr[4:]) {
		return nil, &badEntryError{er.off, "checksum mismatch"}
	}
	er.off += entryHeaderSize + int64(n)
	return er.body, nil
}

// entry is a parsed entry body; its slices alias the body.
type entry struct {
	name  []byte
	first uint64
	count uint32
	recs  []byte // records not yet returned by nextRecord
}

// parseEntry parses and fully validates a body, records included.
func parseEntry(body []byte) (entry, error) {
	if len(body) < 1 || len(body) < 1+int(body[0])+8+4 || body[0] == 0 {
		return entry{}, errors.New("short body or empty name")
	}
	nameEnd := 1 + int(body[0])
	e := entry{
		name:  body[1:nameEnd],
		first: binary.BigEndian.Uint64(body[nameEnd:]),
		count: binary.BigEndian.Uint32(body[nameEnd+8:]),
		recs:  body[nameEnd+12:],
	}
	switch {
	case e.first == 0 || e.count == 0:
		return entry{}, errors.New("zero first sequence ID or count")
	case e.first > math.MaxUint64-uint64(e.count-1):
		return entry{}, errors.New("sequence IDs overflow")
	}
	rest := e.recs
	for range e.count {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return entry{}, errors.New("bad record length")
		}
		rest = rest[k+int(n):]
	}
	if len(rest) != 0 {
		return entry{}, errors.New("bytes after the last record")
	}
	return e, nil
}

// nextRecord returns the next record of an entry that parseEntry accepted.
func (e *entry) nextRecord() []byte {
	n, k := binary.Uvarint(e.recs)
	end := k + int(n)
	rec := e.recs[k:end:end]
	e.recs = e.recs[end:]
	return rec
}

// uvarintLen is the size of the uvarint encoding of x.
func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// appendEntry appends one entry (header and body of bodyLen bytes) holding
// records to buf and returns it.
func appendEntry(buf []byte, producer string, first uint64, records [][]byte, bodyLen int) []byte {
	buf = slices.Grow(buf, entryHeaderSize+bodyLen)
	start := len(buf)
	buf = buf[:start+entryHeaderSize]
	buf = append(buf, byte(len(producer)))
	buf = append(buf, producer...)
	buf = binary.BigEndian.AppendUint64(buf, first)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(records)))
	for _, r := range records {
		buf = binary.AppendUvarint(buf, uint64(len(r)))
		buf = append(buf, r...)
	}
	binary.BigEndian.PutUint32(buf[start:], uint32(bodyLen))
	binary.BigEndian.PutUint32(buf[start+4:], crc32.Checksum(buf[start+entryHeaderSize:], castagnoli))
	return buf
}
