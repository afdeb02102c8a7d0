package wire_test

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/inflightmq/inflight/wire"
)

// FuzzDecode feeds arbitrary bytes to every decoder, then splits them into
// frames and decodes each as its type says. Nothing may panic, decoders
// must agree with TypeOf, and every frame that decodes must re-encode to
// the same bytes.
func FuzzDecode(f *testing.F) {
	var stream []byte
	for _, s := range samples(f) {
		f.Add(s.frame)
		stream = append(stream, s.frame...)
	}
	f.Add(stream)
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 1, 9})
	f.Add(rawBatch(1, 1, wire.CodecNone, 2, []byte{0x80, 0x00}))
	f.Add(rawBatch(1, 2, wire.CodecNone, 3, []byte{1, 'a', 0x80}))
	f.Add(rawBatch(1, 1, wire.Codec(9), 1, []byte{0}))

	f.Fuzz(func(t *testing.T, data []byte) {
		for _, dec := range decoders {
			_, _ = dec(data)
		}
		rest := data
		for {
			frame, n, err := wire.Split(rest, wire.DefaultMaxFrameSize)
			if err != nil {
				if !errors.Is(err, wire.ErrFrameTooLarge) && !errors.Is(err, wire.ErrMalformed) {
					t.Fatalf("Split: unexpected error %v", err)
				}
				return
			}
			if n == 0 {
				return
			}
			if n != len(frame) || !bytes.Equal(frame, rest[:n]) {
				t.Fatalf("Split returned %d bytes, n = %d", len(frame), n)
			}
			rest = rest[n:]
			checkFrame(t, frame)
		}
	})
}

// checkFrame decodes one frame from Split.
func checkFrame(t *testing.T, frame []byte) {
	typ, err := wire.TypeOf(frame)
	if err != nil {
		for dt, dec := range decoders {
			if _, derr := dec(frame); derr == nil {
				t.Fatalf("TypeOf failed (%v) but Decode %v succeeded", err, dt)
			}
		}
		return
	}
	for dt, dec := range decoders {
		if _, derr := dec(frame); dt != typ && !errors.Is(derr, wire.ErrUnexpectedType) {
			t.Fatalf("Decode %v of a %v frame: %v", dt, typ, derr)
		}
	}

	var re []byte
	switch typ {
	case wire.TypeHello:
		h, err := wire.DecodeHello(frame)
		if err != nil {
			return
		}
		if re, err = wire.AppendHello(nil, h); err != nil {
			t.Fatalf("re-encoding decoded %+v: %v", h, err)
		}
	case wire.TypeHelloOK:
		h, err := wire.DecodeHelloOK(frame)
		if err != nil {
			return
		}
		re = wire.AppendHelloOK(nil, h)
	case wire.TypeReceipt:
		rs, err := wire.DecodeReceipts(frame, nil)
		if err != nil {
			return
		}
		re = wire.AppendReceipts(nil, rs)
	case wire.TypeTopic:
		tp, err := wire.DecodeTopic(frame)
		if err != nil {
			return
		}
		if re, err = wire.AppendTopic(nil, tp); err != nil {
			t.Fatalf("re-encoding decoded %+v: %v", tp, err)
		}
	case wire.TypeTopicOK:
		ok, err := wire.DecodeTopicOK(frame)
		if err != nil {
			return
		}
		re = wire.AppendTopicOK(nil, ok)
	case wire.TypeTopicError:
		e, err := wire.DecodeTopicError(frame)
		if err != nil {
			return
		}
		re = wire.AppendTopicError(nil, e)
	case wire.TypeError:
		e, err := wire.DecodeError(frame)
		if err != nil {
			return
		}
		re = wire.AppendError(nil, e)
	case wire.TypePing:
		p, err := wire.DecodePing(frame)
		if err != nil {
			return
		}
		re = wire.AppendPing(nil, p)
	case wire.TypePong:
		p, err := wire.DecodePong(frame)
		if err != nil {
			return
		}
		re = wire.AppendPong(nil, p)
	case wire.TypeBatch:
		var ok bool
		if re, ok = rebuildBatch(t, frame); !ok {
			return
		}
	default:
		t.Fatalf("TypeOf returned unknown type %v", typ)
	}
	if !bytes.Equal(re, frame) {
		t.Fatalf("%v re-encoded differently:\n got %x\nwant %x", typ, re, frame)
	}
}

// rebuildBatch decodes a BATCH and, if it decodes to records, builds it
// again from them.
func rebuildBatch(t *testing.T, frame []byte) ([]byte, bool) {
	b, err := wire.DecodeBatch(frame)
	if err != nil {
		return nil, false
	}
	if b.Count == 0 || b.FirstSeq == 0 || b.LastSeq() < b.FirstSeq {
		t.Fatalf("DecodeBatch accepted header %+v", b)
	}
	it, err := b.Records()
	if b.Codec != wire.CodecNone {
		if !errors.Is(err, wire.ErrUnsupportedCodec) {
			t.Fatalf("Records of %v batch: %v", b.Codec, err)
		}
		return nil, false
	}
	if err != nil {
		t.Fatalf("Records of a decoded none batch: %v", err)
	}
	var iterated []wire.Record
	var rr wire.RecordReader
	for rec, ok := it.NextRecord(&rr); ok; rec, ok = it.NextRecord(&rr) {
		iterated = append(iterated, rec)
	}
	recs, err := b.AppendRecords(nil)
	if (err == nil) != (it.Err() == nil) {
		t.Fatalf("AppendRecords error %v, iterator error %v", err, it.Err())
	}
	if err != nil {
		return nil, false
	}
	if len(recs) != int(b.Count) || len(iterated) != len(recs) {
		t.Fatalf("AppendRecords gave %d, RecordIter %d, count %d", len(recs), len(iterated), b.Count)
	}
	var bb wire.BatchBuilder
	bb.Reset(nil, b.Topic, b.FirstSeq)
	for i, r := range iterated {
		if !bytes.Equal(r.Payload, recs[i]) {
			t.Fatalf("record %d: AppendRecords and RecordIter disagree", i)
		}
		if _, err := wire.CheckMeta(r.Key, r.Headers, r.EventTime); err != nil {
			t.Fatalf("record %d: decoded metadata fails CheckMeta: %v", i, err)
		}
		bb.AddRecord(r.Payload, r.Key, r.Headers, r.EventTime)
	}
	return bb.Finish(), true
}

// FuzzBatchBuilder builds a batch from records cut out of data (one record
// per byte of cuts, that byte giving its length; an odd byte also gives the
// record a key, two headers and an event time cut from the same bytes) and
// decodes it back, metadata included.
func FuzzBatchBuilder(f *testing.F) {
	f.Add(uint64(1), []byte("hello world"), []byte{5, 0, 6})
	f.Add(uint64(0), []byte{}, []byte{})
	f.Add(uint64(math.MaxUint64), bytes.Repeat([]byte("x"), 300), []byte{200, 0, 255, 1})
	f.Add(uint64(1<<40), []byte("only"), []byte{})

	f.Add(uint64(9), []byte("key and headers"), []byte{7, 3, 5})

	f.Fuzz(func(t *testing.T, firstSeq uint64, data, cuts []byte) {
		var recs [][]byte
		var metas []wire.Record // metas[i]: the metadata of recs[i]
		for _, c := range cuts {
			n := min(int(c), len(data))
			r := data[:n]
			recs = append(recs, r)
			data = data[n:]
			var m wire.Record
			if c&1 == 1 {
				k := r[:len(r)/2]
				m = wire.Record{Key: k, Headers: []wire.Header{{Key: "h" + string(k), Value: r[len(r)/2:]}, {Key: "h", Value: nil}},
					EventTime: time.Unix(int64(c)-128, int64(firstSeq%1e9))}
				if _, err := wire.CheckMeta(m.Key, m.Headers, m.EventTime); err != nil {
					m = wire.Record{}
				}
			}
			metas = append(metas, m)
		}
		if len(data) > 0 || len(recs) == 0 {
			recs = append(recs, data)
			metas = append(metas, wire.Record{})
		}
		firstSeq = max(firstSeq, 1)
		firstSeq = min(firstSeq, wire.MaxSeq-uint64(len(recs)-1))

		var bb wire.BatchBuilder
		var first []byte
		buf := make([]byte, 0, 64)
		for round := range 2 { // the second round reuses the first frame
			bb.Reset(buf, 0, firstSeq)
			for i, r := range recs {
				m := metas[i]
				meta, err := wire.CheckMeta(m.Key, m.Headers, m.EventTime)
				if err != nil {
					t.Fatal(err)
				}
				before := bb.Size()
				bb.AddRecord(r, m.Key, m.Headers, m.EventTime)
				if n := meta + len(r); bb.Size() != before+wire.RecordOverhead(n)+n {
					t.Fatalf("Size grew %d -> %d for a %d-byte record", before, bb.Size(), n)
				}
				if round == 1 && i%2 == 0 {
					bb.Sum() // the CRC taken in steps: the same frame
				}
			}
			if bb.Count() != len(recs) || bb.FirstSeq() != firstSeq {
				t.Fatalf("Count %d FirstSeq %d", bb.Count(), bb.FirstSeq())
			}
			size := bb.Size()
			frame := bb.Finish()
			if len(frame) != size {
				t.Fatalf("frame is %d bytes, Size said %d", len(frame), size)
			}
			if round == 0 {
				first = bytes.Clone(frame)
			} else if !bytes.Equal(frame, first) {
				t.Fatal("rebuilding in the reused buffer, summing as it went, gave different bytes")
			}
			checkBuilt(t, frame, firstSeq, recs)
			checkMeta(t, frame, metas)
			buf = frame
		}
	})
}

func checkBuilt(t *testing.T, frame []byte, firstSeq uint64, recs [][]byte) {
	got, n, err := wire.Split(frame, len(frame))
	if err != nil || n != len(frame) {
		t.Fatalf("Split = %d, %v", n, err)
	}
	b, err := wire.DecodeBatch(got)
	if err != nil {
		t.Fatalf("DecodeBatch: %v", err)
	}
	if b.FirstSeq != firstSeq || int(b.Count) != len(recs) || b.LastSeq() != firstSeq+uint64(len(recs))-1 {
		t.Fatalf("header %+v for %d records from %d", b, len(recs), firstSeq)
	}
	out, err := b.AppendRecords(nil)
	if err != nil {
		t.Fatalf("AppendRecords: %v", err)
	}
	if !slices.EqualFunc(out, recs, bytes.Equal) {
		t.Fatal("records differ after the round trip")
	}
}

// checkMeta checks that the records of frame carry metas.
func checkMeta(t *testing.T, frame []byte, metas []wire.Record) {
	t.Helper()
	it := recordsOf(t, frame)
	var rr wire.RecordReader
	i := 0
	for r, ok := it.NextRecord(&rr); ok; r, ok = it.NextRecord(&rr) {
		m := metas[i]
		if !bytes.Equal(r.Key, m.Key) || !r.EventTime.Equal(m.EventTime) || len(r.Headers) != len(m.Headers) {
			t.Fatalf("record %d: metadata %+v, want %+v", i, r, m)
		}
		for j, h := range m.Headers {
			if r.Headers[j].Key != h.Key || !bytes.Equal(r.Headers[j].Value, h.Value) {
				t.Fatalf("record %d header %d: %+v, want %+v", i, j, r.Headers[j], h)
			}
		}
		i++
	}
	if it.Err() != nil || i != len(metas) {
		t.Fatalf("read %d of %d records: %v", i, len(metas), it.Err())
	}
}
