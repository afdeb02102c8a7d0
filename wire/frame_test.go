package wire_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/inflightmq/inflight/wire"
)

func TestStrings(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{wire.TypeHello.String(), "HELLO"},
		{wire.TypeHelloOK.String(), "HELLO_OK"},
		{wire.TypeBatch.String(), "BATCH"},
		{wire.TypeReceipt.String(), "RECEIPT"},
		{wire.TypeError.String(), "ERROR"},
		{wire.TypePing.String(), "PING"},
		{wire.TypePong.String(), "PONG"},
		{wire.Type(0).String(), "Type(0)"},
		{wire.Type(200).String(), "Type(200)"},
		{wire.CodecNone.String(), "none"},
		{wire.CodecZstd.String(), "zstd"},
		{wire.CodecS2.String(), "s2"},
		{wire.CodecSnappy.String(), "snappy"},
		{wire.Codec(9).String(), "Codec(9)"},
		{wire.CodeProtocol.String(), "protocol"},
		{wire.CodeReplaced.String(), "replaced"},
		{wire.CodeInternal.String(), "internal"},
		{wire.CodeStoreUnavailable.String(), "store unavailable"},
		{wire.CodeFenced.String(), "fenced"},
		{wire.CodeNameInUse.String(), "name in use"},
		{wire.ErrorCode(0).String(), "ErrorCode(0)"},
		{wire.ErrorCode(77).String(), "ErrorCode(77)"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// TestGoldenFrames pins the byte layout other packages are written against.
func TestGoldenFrames(t *testing.T) {
	hello, err := wire.AppendHello(nil, wire.Hello{Version: 4, MaxFrameSize: 4 << 20, Epoch: 0x0102, Instance: 0x0a0b, Yield: true, Producer: "ab"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"hello", hello, "0000001b 01 0004 00400000 0000000000000102 0000000000000a0b 01 02 6162"},
		{"hello_ok", wire.AppendHelloOK(nil, wire.HelloOK{MaxFrameSize: 4 << 20, Epoch: 3}),
			"0000000d 02 00400000 0000000000000003"},
		{"receipt", wire.AppendReceipt(nil, wire.Receipt{Topic: 1, Seq: 0x0102030405060708}),
			"0000000d 04 00000001 0102030405060708"},
		{"receipts", wire.AppendReceipts(nil, []wire.Receipt{{Topic: 2, Seq: 3}, {Topic: 0x0a0b0c0d, Seq: 1}}),
			"00000019 04 00000002 0000000000000003 0a0b0c0d 0000000000000001"},
		{"topic", mustTopic(t, wire.Topic{ID: 5, Name: "ab"}), "00000008 08 00000005 02 6162"},
		{"topic_ok", wire.AppendTopicOK(nil, wire.TopicOK{ID: 5, LastSeq: 9}), "0000000d 09 00000005 0000000000000009"},
		{"topic_error", wire.AppendTopicError(nil, wire.TopicError{ID: 5, Code: wire.CodeUnauthorized, Text: "x"}), "00000008 0a 00000005 000b 78"},
		{"error", wire.AppendError(nil, wire.Error{Code: wire.CodeReplaced, Text: "x"}), "00000004 05 0006 78"},
		{"error fenced", wire.AppendError(nil, wire.Error{Code: wire.CodeFenced}), "00000003 05 000c"},
		{"ping", wire.AppendPing(nil, wire.Ping{Nonce: 1}), "00000009 06 0000000000000001"},
		{"pong", wire.AppendPong(nil, wire.Pong{Nonce: 2}), "00000009 07 0000000000000002"},
		// CRCs computed outside Go. Records: uvarint length (of what follows
		// the flags byte), flags byte (1 key, 2 headers, 4 event time), the
		// fields flagged, the payload.
		{"batch", buildBatch(7, []byte("hi"), nil),
			"00000020 03 00000000 0000000000000007 00000002 00 00000006 bd5023b5 02 00 6869 00 00"},
		{"batch with metadata", metaBatch(),
			"0000002c 03 00000000 0000000000000001 00000001 00 00000012 c4d9cba3 10 07 01 6b 01 01 68 01 76 0000000000000001 70"},
	} {
		want := strings.ReplaceAll(tc.want, " ", "")
		if got := hex.EncodeToString(tc.got); got != want {
			t.Errorf("%s: got %s, want %s", tc.name, got, want)
		}
	}
}

func TestFrameSize(t *testing.T) {
	for i := range 4 {
		if _, ok := wire.FrameSize(make([]byte, i)); ok {
			t.Errorf("FrameSize of %d bytes reported ok", i)
		}
	}
	if n, ok := wire.FrameSize([]byte{0, 0, 1, 0}); !ok || n != 260 {
		t.Errorf("FrameSize = %d, %v; want 260, true", n, ok)
	}
	if n, ok := wire.FrameSize([]byte{0xff, 0xff, 0xff, 0xff, 9}); !ok || uint64(n) != 1<<32+3 {
		t.Errorf("FrameSize of max prefix = %d, %v", n, ok)
	}
}

// TestSplitStream feeds concatenated frames one byte at a time, as a slow
// socket would, and expects exactly the original frames back.
func TestSplitStream(t *testing.T) {
	var stream []byte
	var want [][]byte
	for _, s := range samples(t) {
		stream = append(stream, s.frame...)
		want = append(want, s.frame)
	}
	var buf []byte
	var got [][]byte
	for _, c := range stream {
		buf = append(buf, c)
		for {
			frame, n, err := wire.Split(buf, wire.DefaultMaxFrameSize)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				if frame != nil {
					t.Fatal("Split returned a frame with n == 0")
				}
				break
			}
			if len(frame) != n || cap(frame) != n {
				t.Fatalf("frame len %d cap %d, n %d", len(frame), cap(frame), n)
			}
			got = append(got, append([]byte(nil), frame...))
			buf = buf[n:]
		}
	}
	if len(buf) != 0 {
		t.Fatalf("%d bytes left over", len(buf))
	}
	if len(got) != len(want) {
		t.Fatalf("got %d frames, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("frame %d: got %x, want %x", i, got[i], want[i])
		}
	}
}

func TestSplitRejectsBeforeBody(t *testing.T) {
	prefix := func(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }
	for _, tc := range []struct {
		name  string
		buf   []byte
		limit int
		want  error
	}{
		{"oversized", prefix(wire.DefaultMaxFrameSize), wire.DefaultMaxFrameSize, wire.ErrFrameTooLarge},
		{"max prefix", prefix(0xffffffff), wire.DefaultMaxFrameSize, wire.ErrFrameTooLarge},
		{"negotiated limit", prefix(wire.MinMaxFrameSize), wire.MinMaxFrameSize, wire.ErrFrameTooLarge},
		{"default limit", prefix(wire.DefaultMaxFrameSize), 0, wire.ErrFrameTooLarge},
		{"zero length", prefix(0), wire.DefaultMaxFrameSize, wire.ErrMalformed},
	} {
		frame, n, err := wire.Split(tc.buf, tc.limit)
		if !errors.Is(err, tc.want) || frame != nil || n != 0 {
			t.Errorf("%s: Split = %v, %d, %v; want error %v", tc.name, frame, n, err, tc.want)
		}
	}
}

func TestSplitNeedMore(t *testing.T) {
	frame := wire.AppendReceipt(nil, wire.Receipt{Seq: 1})
	for i := range len(frame) {
		f, n, err := wire.Split(frame[:i], wire.DefaultMaxFrameSize)
		if f != nil || n != 0 || err != nil {
			t.Errorf("Split of %d bytes = %v, %d, %v; want need more", i, f, n, err)
		}
	}
}

func TestSplitLimitBoundary(t *testing.T) {
	frame := wire.AppendError(nil, wire.Error{Code: wire.CodeProtocol, Text: "boundary"})
	if _, n, err := wire.Split(frame, len(frame)); err != nil || n != len(frame) {
		t.Errorf("Split at exact limit = %d, %v", n, err)
	}
	if _, _, err := wire.Split(frame, len(frame)-1); !errors.Is(err, wire.ErrFrameTooLarge) {
		t.Errorf("Split one over limit: %v, want ErrFrameTooLarge", err)
	}
}

func TestTypeOf(t *testing.T) {
	for _, s := range samples(t) {
		if typ, err := wire.TypeOf(s.frame); err != nil || typ != s.typ {
			t.Errorf("%s: TypeOf = %v, %v; want %v", s.name, typ, err, s.typ)
		}
	}
	ping := wire.AppendPing(nil, wire.Ping{})
	for _, tc := range []struct {
		name  string
		frame []byte
		want  error
	}{
		{"nil", nil, wire.ErrTruncated},
		{"prefix only", ping[:4], wire.ErrTruncated},
		{"short body", ping[:len(ping)-1], wire.ErrTruncated},
		{"trailing byte", append(append([]byte(nil), ping...), 0), wire.ErrMalformed},
		{"zero length", []byte{0, 0, 0, 0}, wire.ErrMalformed},
		{"type 0", []byte{0, 0, 0, 1, 0}, wire.ErrUnknownType},
		{"type 11", []byte{0, 0, 0, 1, 11}, wire.ErrUnknownType},
		{"type 255", []byte{0, 0, 0, 1, 255}, wire.ErrUnknownType},
	} {
		if _, err := wire.TypeOf(tc.frame); !errors.Is(err, tc.want) {
			t.Errorf("%s: TypeOf error %v, want %v", tc.name, err, tc.want)
		}
		for typ, dec := range decoders {
			if _, err := dec(tc.frame); !errors.Is(err, tc.want) {
				t.Errorf("%s: Decode %v error %v, want %v", tc.name, typ, err, tc.want)
			}
		}
	}
}

// metaBatch is one record with every metadata field: key "k", header h=v,
// event time 1 ns after the Unix epoch, payload "p".
func metaBatch() []byte {
	var bb wire.BatchBuilder
	bb.Reset(nil, 0, 1)
	bb.AddRecord([]byte("p"), []byte("k"), []wire.Header{{Key: "h", Value: []byte("v")}}, time.Unix(0, 1))
	return bb.Finish()
}
