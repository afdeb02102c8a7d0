package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/inflightmq/inflight/wire/crc32c"
)

// BatchHeaderSize is the size of a BATCH frame before its data: the frame
// header (5 bytes) and the batch header (25 bytes). topic is the id a TOPIC
// frame declared on the connection; the records are that topic's.
//
//	 0      4    5       9          17      21    22      26    30
//	+------+----+-------+----------+-------+-----+-------+-----+---------+
//	|length|type| topic | firstSeq | count |codec|rawLen | crc | data... |
//	+------+----+-------+----------+-------+-----+-------+-----+---------+
const BatchHeaderSize = 4 + 1 + 25

// MaxSeq is the highest sequence id a record may have: 2^63-1. A BATCH
// whose last record would be beyond it is malformed, which a broker
// refuses as a protocol error (CodeProtocol), so that sequence ids never
// wrap and two of them always compare as their difference does. A
// producer whose name's last stored sequence id is MaxSeq can send
// nothing more under that name.
const MaxSeq = 1<<63 - 1

// Offsets of the batch header fields within a BATCH frame.
const (
	offTopic    = HeaderSize
	offFirstSeq = offTopic + 4
	offCount    = offFirstSeq + 8
	offCodec    = offCount + 4
	offRawLen   = offCodec + 1
	offCRC      = offRawLen + 4
)

// Batch is a decoded BATCH frame. Data aliases the frame it was decoded
// from and is valid only as long as that frame is.
type Batch struct {
	Topic    uint32 // the topic's id on the connection (see Topic)
	FirstSeq uint64 // sequence id of the first record, at least 1
	Count    uint32 // number of records, at least 1
	Codec    Codec  // compression of Data
	RawLen   uint32 // size of the uncompressed records block
	CRC      uint32 // CRC-32C of Data
	Data     []byte // records block as carried, compressed by Codec
}

// DecodeBatch decodes a BATCH frame without parsing its records. It checks
// the header (count >= 1, firstSeq >= 1, the last sequence id at most
// MaxSeq, rawLen of at least one byte per record, and for CodecNone rawLen ==
// len(Data)), the codec value and the CRC. It does not allocate on success.
func DecodeBatch(frame []byte) (Batch, error) {
	b, err := body(frame, TypeBatch)
	if err != nil {
		return Batch{}, err
	}
	if len(b) < BatchHeaderSize-HeaderSize {
		return Batch{}, fmt.Errorf("%w: BATCH body is %d bytes, header needs %d",
			ErrTruncated, len(b), BatchHeaderSize-HeaderSize)
	}
	bt := Batch{
		Topic:    binary.BigEndian.Uint32(frame[offTopic:]),
		FirstSeq: binary.BigEndian.Uint64(frame[offFirstSeq:]),
		Count:    binary.BigEndian.Uint32(frame[offCount:]),
		Codec:    Codec(frame[offCodec]),
		RawLen:   binary.BigEndian.Uint32(frame[offRawLen:]),
		CRC:      binary.BigEndian.Uint32(frame[offCRC:]),
		Data:     frame[BatchHeaderSize:],
	}
	switch {
	case bt.Count == 0:
		return Batch{}, fmt.Errorf("%w: batch of zero records", ErrMalformed)
	case bt.FirstSeq == 0:
		return Batch{}, fmt.Errorf("%w: first sequence id 0", ErrMalformed)
	case bt.FirstSeq > MaxSeq-uint64(bt.Count-1):
		return Batch{}, fmt.Errorf("%w: %d records from sequence id %d go beyond the limit %d", ErrMalformed,
			bt.Count, bt.FirstSeq, uint64(MaxSeq))
	case uint64(bt.RawLen) < 2*uint64(bt.Count): // every record takes at least its length and flags bytes
		return Batch{}, fmt.Errorf("%w: raw length %d too small for %d records",
			ErrMalformed, bt.RawLen, bt.Count)
	case !bt.Codec.known():
		return Batch{}, fmt.Errorf("%w: %v", ErrUnsupportedCodec, bt.Codec)
	case bt.Codec == CodecNone && uint64(bt.RawLen) != uint64(len(bt.Data)):
		return Batch{}, errRawLen(bt.RawLen, len(bt.Data))
	}
	if sum := crc32c.Checksum(bt.Data); sum != bt.CRC {
		return Batch{}, fmt.Errorf("%w: computed %08x, header says %08x", ErrChecksum, sum, bt.CRC)
	}
	return bt, nil
}

func errRawLen(rawLen uint32, n int) error {
	return fmt.Errorf("%w: raw length %d, records block is %d bytes", ErrMalformed, rawLen, n)
}

// Decompress returns the batch with its records block decoded by d into
// dst (grown if needed; reuse it across calls): a CodecNone batch whose
// Records can be read. A CodecNone batch is returned as is. Errors:
// ErrFrameTooLarge when RawLen exceeds d's limit (checked before any
// allocation), ErrMalformed when the block does not decode to exactly
// RawLen bytes. The CRC was checked by DecodeBatch, on the compressed data.
func (b *Batch) Decompress(d *Decompressor, dst []byte) (Batch, []byte, error) {
	if b.Codec == CodecNone {
		return *b, dst, nil
	}
	out, err := d.Decode(dst, b.Codec, b.Data, int(b.RawLen))
	if err != nil {
		return Batch{}, out, err
	}
	nb := *b
	nb.Codec, nb.Data = CodecNone, out
	return nb, out, nil
}

// LastSeq returns the sequence id of the last record, FirstSeq+Count-1.
// It is meaningful for a batch returned by DecodeBatch.
func (b *Batch) LastSeq() uint64 {
	return b.FirstSeq + uint64(b.Count) - 1
}

// Records returns an iterator over the records of a CodecNone batch. It
// returns ErrUnsupportedCodec for other codecs and ErrMalformed if RawLen
// is not len(Data). It does not allocate on success.
func (b *Batch) Records() (RecordIter, error) {
	if b.Codec != CodecNone {
		return RecordIter{}, fmt.Errorf("%w: cannot read %v records", ErrUnsupportedCodec, b.Codec)
	}
	if uint64(b.RawLen) != uint64(len(b.Data)) {
		return RecordIter{}, errRawLen(b.RawLen, len(b.Data))
	}
	return NewRecordIter(b.Data, b.Count), nil
}

// NewRecordIter returns an iterator over count records in block, an
// uncompressed records block as a BATCH frame carries it (a batch's Data,
// or what RecordIter.Rest returned). Next and Err check it as they go.
func NewRecordIter(block []byte, count uint32) RecordIter {
	return RecordIter{data: block, left: count}
}

// AppendRecords appends the payload of every record of a CodecNone batch to
// dst and returns the extended slice; the metadata is checked and dropped
// (read records whole with RecordIter.NextRecord). The payloads alias Data.
// It validates the whole block first-to-last and on error returns dst at its
// original length with the error of Records or RecordIter.Err. It allocates
// only if dst lacks capacity, or for records with headers.
func (b *Batch) AppendRecords(dst [][]byte) ([][]byte, error) {
	it, err := b.Records()
	if err != nil {
		return dst, err
	}
	var rr RecordReader
	n := len(dst)
	for rec, ok := it.NextRecord(&rr); ok; rec, ok = it.NextRecord(&rr) {
		dst = append(dst, rec.Payload)
		rr.Reset()
	}
	if err := it.Err(); err != nil {
		return dst[:n], err
	}
	return dst, nil
}

// RecordIter walks the records of a batch in order. Obtain one from
// Batch.Records; the zero value yields nothing. It is not safe for
// concurrent use.
//
//	for rec, ok := it.Next(); ok; rec, ok = it.Next() { ... }
//	if err := it.Err(); err != nil { ... }
type RecordIter struct {
	data []byte // records not yet read
	left uint32 // records the header promises beyond those read
	err  error
}

// Next returns the next record as carried (its flags byte, metadata and
// payload: see RecordReader), aliasing the batch data with its capacity
// capped at its length, and true; or nil and false when the batch is done
// or malformed (see Err). It does not allocate unless it finds an error.
func (it *RecordIter) Next() (rec []byte, ok bool) {
	// The common case inline: a record length under 1<<14, spelled in one
	// byte, or in two whose second is in [1, 0x7f] (the last byte of a
	// uvarint, and not 0: the shortest spelling), with the record whole in
	// the data. Anything else, errors included, takes next, which checks
	// it all.
	if d := it.data; it.left > 0 && len(d) >= 2 && it.err == nil {
		n, k, short := int(d[0]), 1, true
		if n >= 0x80 {
			n, k, short = n&0x7f|int(d[1])<<7, 2, d[1]-1 < 0x7f
		}
		if end := k + 1 + n; short && end <= len(d) {
			it.data = d[end:]
			it.left--
			return d[k:end:end], true
		}
	}
	return it.next()
}

// next is Next's general case.
func (it *RecordIter) next() (rec []byte, ok bool) {
	if it.err != nil {
		return nil, false
	}
	if it.left == 0 {
		if len(it.data) != 0 {
			it.err = fmt.Errorf("%w: %d bytes after the last record", ErrMalformed, len(it.data))
			it.data = nil
		}
		return nil, false
	}
	if len(it.data) == 0 {
		it.err = fmt.Errorf("%w: records end %d short of the count", ErrMalformed, it.left)
		return nil, false
	}
	n, k := binary.Uvarint(it.data)
	switch {
	case k <= 0:
		it.err = fmt.Errorf("%w: bad record length uvarint", ErrMalformed)
	case k != uvarintLen(n):
		// Only the shortest encoding is allowed, so a frame has one spelling.
		it.err = fmt.Errorf("%w: record length uvarint not minimal", ErrMalformed)
	case n >= uint64(len(it.data)-k): // the flags byte follows the length, uncounted
		it.err = fmt.Errorf("%w: record of 1+%d bytes, %d left", ErrMalformed, n, len(it.data)-k)
	}
	if it.err != nil {
		it.data = nil
		return nil, false
	}
	end := k + 1 + int(n)
	rec = it.data[k:end:end]
	it.data = it.data[end:]
	it.left--
	return rec, true
}

// Rest returns the records Next has not returned yet as the batch carries
// them (a records block, aliasing the batch data with its capacity capped
// at its length), or nil once Next found the batch malformed. After n
// calls of Next that returned true on a batch of Count records, it holds
// Count-n records.
func (it *RecordIter) Rest() []byte {
	if it.err != nil {
		return nil
	}
	return it.data[:len(it.data):len(it.data)]
}

// NextRecord is Next followed by rr.Read: it returns the next record parsed,
// and false when the batch is done or malformed, the record's metadata
// included (see Err).
func (it *RecordIter) NextRecord(rr *RecordReader) (Record, bool) {
	raw, ok := it.Next()
	if !ok {
		return Record{}, false
	}
	r, err := rr.Read(raw)
	if err != nil {
		it.err, it.data = err, nil
		return Record{}, false
	}
	return r, true
}

// Err returns nil if Next has returned every record the header promised
// and the data ended exactly after the last one; otherwise, once Next has
// returned false, an error wrapping ErrMalformed. Call it after Next
// returns false.
func (it *RecordIter) Err() error {
	return it.err
}
