// Package wire is the frame format spoken between an inflight producer and a
// broker. It encodes and decodes frames; it does no I/O.
//
// # Frames
//
// Every frame is a big-endian length prefix, a type byte and a body. The
// length counts the bytes after the prefix (type byte included), so it is
// never zero. "Frame" in this package always means the whole thing,
// prefix included, and frame size limits apply to that whole size.
//
//	 0       4    5
//	+-------+----+------------------------+
//	|length |type| body (length-1 bytes)  |
//	+-------+----+------------------------+
//	  u32    u8
//
// Bodies, by type (all integers big-endian):
//
//	HELLO     | u16 version | u32 maxFrameSize | u8 nameLen | name | u8 topicLen | topic | [u16 tokenLen | token] |
//	HELLO_OK  | u64 lastSeq | u32 maxFrameSize |
//	BATCH     | u64 firstSeq | u32 count | u8 codec | u32 rawLen | u32 crc | data ... |
//	RECEIPT   | u64 seq |
//	ERROR     | u16 code | text ... |
//	PING      | u64 nonce |
//	PONG      | u64 nonce |
//
// A body must have exactly its declared size; only BATCH data and ERROR
// text run to the end of the frame. HELLO's token is optional: a HELLO
// without one ends after the topic (see Hello).
//
// # Batches
//
// A BATCH carries count records with consecutive sequence ids starting at
// firstSeq, the last at most MaxSeq. Its records block is count repetitions
// of a uvarint length n, a flags byte, and n bytes: the metadata the flags
// announce (key, headers, event time; see RecordReader) followed by the
// payload (empty payloads are allowed). A record without metadata is its
// length, a 0 and its payload:
//
//	+---------+-------+--------+---------+-------+--------+-----+
//	| uvarint | flags | rec 0  | uvarint | flags | rec 1  | ... |
//	+---------+-------+--------+---------+-------+--------+-----+
//
// # Versions
//
// Version 2 added the topic to HELLO and the flags byte and metadata to
// records; later, within version 2, the optional token at the end of HELLO.
// Version 3 (this one) added the epoch and the Yield flag to HELLO and the
// epoch to HELLO_OK: each incarnation of a producer name gets an epoch
// from the broker, and a newer one fences the older (CodeFenced). A broker
// answers a HELLO of any other version with an ERROR of code CodeVersion
// before reading anything else of it (a producer of version 2 meets a
// broker of version 3 so, and the other way round); a producer that gets
// that ERROR reports it and does not send a BATCH.
//
// The block is carried as data, compressed by codec or not; rawLen is the
// size of the uncompressed block and crc is the CRC-32C (Castagnoli) of data
// exactly as carried, so corruption is caught before any decompression.
// In this version only CodecNone batches can be read record by record.
//
// # Memory
//
// Encoders append to a caller-supplied slice and allocate only when it lacks
// capacity. Decoders never copy: slices they return (Batch.Data, records,
// frames from Split) alias the input, so they are valid only as long as the
// input is. The only decoders that allocate on success are DecodeHello (the
// producer name, topic and token) and DecodeError (the text), neither on a hot
// path, and RecordReader for a header key it has not seen before.
// Building a BATCH with BatchBuilder, decoding one and iterating its
// records, and encoding or decoding a RECEIPT allocate nothing. Errors are
// wrapped with detail and may allocate.
//
// No function in this package panics on any input. All functions are safe
// for concurrent use; BatchBuilder and RecordIter values are not.
package wire
