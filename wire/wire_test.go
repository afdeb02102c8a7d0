package wire_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/inflightmq/inflight/wire"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// sample is a valid frame and the type it carries.
type sample struct {
	name  string
	typ   wire.Type
	frame []byte
}

// samples returns valid frames of every type, several batches among them.
func samples(tb testing.TB) []sample {
	tb.Helper()
	hello, err := wire.AppendHello(nil, wire.Hello{
		Version: wire.Version, MaxFrameSize: wire.DefaultMaxFrameSize, Producer: "orders-1",
	})
	if err != nil {
		tb.Fatal(err)
	}
	return []sample{
		{"hello", wire.TypeHello, hello},
		{"hello_ok", wire.TypeHelloOK, wire.AppendHelloOK(nil, wire.HelloOK{MaxFrameSize: 1 << 16})},
		{"receipt", wire.TypeReceipt, wire.AppendReceipt(nil, wire.Receipt{Seq: 1234})},
		{"receipts", wire.TypeReceipt, wire.AppendReceipts(nil, []wire.Receipt{{Topic: 3, Seq: 9}, {Topic: 0, Seq: 1}, {Topic: 1 << 31, Seq: wire.MaxSeq}})},
		{"topic", wire.TypeTopic, mustTopic(tb, wire.Topic{ID: 7, Name: "orders.eu-1_x"})},
		{"topic_ok", wire.TypeTopicOK, wire.AppendTopicOK(nil, wire.TopicOK{ID: 7, LastSeq: 99})},
		{"topic_error", wire.TypeTopicError, wire.AppendTopicError(nil, wire.TopicError{ID: 7, Code: wire.CodeUnauthorized, Text: "no"})},
		{"error", wire.TypeError, wire.AppendError(nil, wire.Error{Code: wire.CodeStore, Text: "disk full"})},
		{"error_empty", wire.TypeError, wire.AppendError(nil, wire.Error{Code: wire.CodeInternal})},
		{"ping", wire.TypePing, wire.AppendPing(nil, wire.Ping{Nonce: 7})},
		{"pong", wire.TypePong, wire.AppendPong(nil, wire.Pong{Nonce: 7})},
		{"batch_one", wire.TypeBatch, buildBatch(1, []byte("a"))},
		{"batch_mixed", wire.TypeBatch, buildBatch(42, []byte("alpha"), nil, bytes.Repeat([]byte("x"), 200))},
		{"batch_empty_records", wire.TypeBatch, buildBatch(5, nil, nil, nil)},
		{"batch_zstd", wire.TypeBatch, rawBatch(10, 2, wire.CodecZstd, 20, []byte("opaque compressed"))},
		{"batch_meta", wire.TypeBatch, metaBatch()},
		{"batch_meta_mixed", wire.TypeBatch, mixedMetaBatch()},
	}
}

// fill resets bb onto buf (reusing its capacity) and adds recs from
// firstSeq.
func fill(bb *wire.BatchBuilder, buf []byte, firstSeq uint64, recs [][]byte) {
	bb.Reset(buf, 0, firstSeq)
	for _, r := range recs {
		bb.Add(r)
	}
}

// filled returns a fresh BatchBuilder holding recs from firstSeq.
func filled(firstSeq uint64, recs [][]byte) *wire.BatchBuilder {
	bb := new(wire.BatchBuilder)
	fill(bb, nil, firstSeq, recs)
	return bb
}

// buildBatch builds a BATCH frame with a fresh BatchBuilder.
func buildBatch(firstSeq uint64, recs ...[]byte) []byte { return filled(firstSeq, recs).Finish() }

// recordsOf decodes a CodecNone BATCH frame and returns the iterator over
// its records; it fails tb on any error.
func recordsOf(tb testing.TB, frame []byte) wire.RecordIter {
	tb.Helper()
	b, err := wire.DecodeBatch(frame)
	if err != nil {
		tb.Fatal(err)
	}
	it, err := b.Records()
	if err != nil {
		tb.Fatal(err)
	}
	return it
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// rawBatch assembles a BATCH frame field by field, independently of the
// package, with a correct CRC of data.
func rawBatch(firstSeq uint64, count uint32, codec wire.Codec, rawLen uint32, data []byte) []byte {
	f := make([]byte, wire.BatchHeaderSize, wire.BatchHeaderSize+len(data))
	f = append(f, data...)
	be := binary.BigEndian
	be.PutUint32(f[0:], uint32(len(f)-4))
	f[4] = byte(wire.TypeBatch)
	be.PutUint32(f[5:], 0) // topic id
	be.PutUint64(f[9:], firstSeq)
	be.PutUint32(f[17:], count)
	f[21] = byte(codec)
	be.PutUint32(f[22:], rawLen)
	be.PutUint32(f[26:], crc32.Checksum(data, castagnoli))
	return f
}

// withBodyLen returns a copy of frame with its body cut or extended to n bytes
// (extension bytes are 0xAB) and its length prefix rewritten to match.
func withBodyLen(frame []byte, n int) []byte {
	f := append([]byte(nil), frame[:min(len(frame), wire.HeaderSize+n)]...)
	for len(f) < wire.HeaderSize+n {
		f = append(f, 0xAB)
	}
	binary.BigEndian.PutUint32(f, uint32(len(f)-4))
	return f
}

// frameOf assembles a frame of type t around body.
func frameOf(t wire.Type, body []byte) []byte {
	f := binary.BigEndian.AppendUint32(nil, uint32(1+len(body)))
	return append(append(f, byte(t)), body...)
}

// decoders decodes a frame with the decoder of each type. A BATCH is also
// read record by record when its codec allows.
var decoders = map[wire.Type]func([]byte) (any, error){
	wire.TypeHello:      func(f []byte) (any, error) { return wire.DecodeHello(f) },
	wire.TypeHelloOK:    func(f []byte) (any, error) { return wire.DecodeHelloOK(f) },
	wire.TypeReceipt:    func(f []byte) (any, error) { return wire.DecodeReceipts(f, nil) },
	wire.TypeTopic:      func(f []byte) (any, error) { return wire.DecodeTopic(f) },
	wire.TypeTopicOK:    func(f []byte) (any, error) { return wire.DecodeTopicOK(f) },
	wire.TypeTopicError: func(f []byte) (any, error) { return wire.DecodeTopicError(f) },
	wire.TypeError:      func(f []byte) (any, error) { return wire.DecodeError(f) },
	wire.TypePing:       func(f []byte) (any, error) { return wire.DecodePing(f) },
	wire.TypePong:       func(f []byte) (any, error) { return wire.DecodePong(f) },
	wire.TypeBatch: func(f []byte) (any, error) {
		b, err := wire.DecodeBatch(f)
		if err != nil || b.Codec != wire.CodecNone {
			return b, err
		}
		recs, err := b.AppendRecords(nil)
		return recs, err
	},
}

// mixedMetaBatch has records with each metadata field alone, all of them,
// none, repeated header keys and empty values.
func mixedMetaBatch() []byte {
	var bb wire.BatchBuilder
	bb.Reset(nil, 0, 100)
	hs := []wire.Header{{Key: "trace", Value: []byte("00-ab")}, {Key: "trace", Value: nil}}
	bb.AddRecord([]byte("key only"), []byte("user-17"), nil, time.Time{})
	bb.AddRecord([]byte("headers only"), nil, hs, time.Time{})
	bb.AddRecord([]byte("time only"), nil, nil, time.Unix(1700000000, 123))
	bb.AddRecord(nil, []byte("k"), hs[:1], time.Unix(-1, 0))
	bb.AddRecord([]byte("none"), nil, nil, time.Time{})
	return bb.Finish()
}

func mustTopic(tb testing.TB, t wire.Topic) []byte {
	tb.Helper()
	f, err := wire.AppendTopic(nil, t)
	if err != nil {
		tb.Fatal(err)
	}
	return f
}
