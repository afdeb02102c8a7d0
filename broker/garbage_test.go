package broker_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/wire"
)

// Offsets of the BATCH header fields (see wire.BatchHeaderSize).
const (
	offTopic    = wire.HeaderSize
	offFirstSeq = offTopic + 4
	offCount    = offFirstSeq + 8
	offCodec    = offCount + 4
	offRawLen   = offCodec + 1
	offCRC      = offRawLen + 4
)

// patched returns a copy of frame with f applied.
func patched(frame []byte, f func(b []byte)) []byte {
	b := bytes.Clone(frame)
	f(b)
	return b
}

// rawBatch builds a BATCH frame from its fields, with a correct CRC.
func rawBatch(first uint64, count uint32, codec wire.Codec, rawLen uint32, data []byte) []byte {
	f := binary.BigEndian.AppendUint32(nil, uint32(wire.BatchHeaderSize-4+len(data)))
	f = append(f, byte(wire.TypeBatch))
	f = binary.BigEndian.AppendUint32(f, 0) // topic id 0
	f = binary.BigEndian.AppendUint64(f, first)
	f = binary.BigEndian.AppendUint32(f, count)
	f = append(f, byte(codec))
	f = binary.BigEndian.AppendUint32(f, rawLen)
	f = binary.BigEndian.AppendUint32(f, crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)))
	return append(f, data...)
}

// rawFrame builds a frame with a correct length prefix around typ and body.
func rawFrame(typ byte, body ...byte) []byte {
	f := binary.BigEndian.AppendUint32(nil, uint32(1+len(body)))
	f = append(f, typ)
	return append(f, body...)
}

func TestGarbage(t *testing.T) {
	hello := helloFrame(t, "p", wire.DefaultMaxFrameSize)
	batch := batchFrame(0, 1, 3)
	var bb wire.BatchBuilder
	bb.Reset(nil, 0, 1)
	bb.Add(bytes.Repeat([]byte("x"), 2000))
	big := bb.Finish()
	badVersion, err := wire.AppendHello(nil, wire.Hello{Version: wire.Version + 1, MaxFrameSize: wire.DefaultMaxFrameSize, Producer: "p"})
	require.NoError(t, err)
	putU32 := func(off int, v uint32) func([]byte) { return func(b []byte) { binary.BigEndian.PutUint32(b[off:], v) } }
	putU64 := func(off int, v uint64) func([]byte) { return func(b []byte) { binary.BigEndian.PutUint64(b[off:], v) } }
	setByte := func(off int, v byte) func([]byte) { return func(b []byte) { b[off] = v } }
	xorByte := func(off int, v byte) func([]byte) {
		return func(b []byte) {
			i := off
			if i < 0 {
				i += len(b) // from the end
			}
			b[i] ^= v
		}
	}

	tests := []struct {
		name       string
		afterHello bool
		brokerMax  int // 0: default
		frame      []byte
		wantCode   wire.ErrorCode
		wantErr    error // the wire error also wrapped, if any
	}{
		{name: "empty", frame: nil, wantCode: wire.CodeProtocol, wantErr: wire.ErrTruncated},
		{name: "three bytes", frame: []byte{0, 0, 0}, wantCode: wire.CodeProtocol, wantErr: wire.ErrTruncated},
		{name: "prefix longer than frame", frame: []byte{0, 0, 0, 9, 6}, wantCode: wire.CodeProtocol, wantErr: wire.ErrTruncated},
		{name: "zero length prefix", frame: []byte{0, 0, 0, 0}, wantCode: wire.CodeProtocol, wantErr: wire.ErrMalformed},
		{name: "trailing bytes", frame: append(wire.AppendPing(nil, wire.Ping{}), 0), wantCode: wire.CodeProtocol, wantErr: wire.ErrMalformed},
		{name: "unknown type", frame: rawFrame(11, 1, 2), wantCode: wire.CodeProtocol, wantErr: wire.ErrUnknownType},
		{name: "type zero", frame: rawFrame(0), wantCode: wire.CodeProtocol, wantErr: wire.ErrUnknownType},
		{name: "unknown type after hello", afterHello: true, frame: rawFrame(0xff, 1), wantCode: wire.CodeProtocol, wantErr: wire.ErrUnknownType},

		{name: "truncated hello", frame: hello[:len(hello)-1], wantCode: wire.CodeProtocol, wantErr: wire.ErrTruncated},
		{name: "hello body too short", frame: rawFrame(byte(wire.TypeHello), 0, 4, 0), wantCode: wire.CodeProtocol, wantErr: wire.ErrTruncated},
		{name: "hello empty name", frame: rawFrame(byte(wire.TypeHello), 0, 4, 0, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), wantCode: wire.CodeProtocol, wantErr: wire.ErrMalformed},
		{name: "hello max frame too small", frame: patched(hello, putU32(wire.HeaderSize+2, wire.MinMaxFrameSize-1)), wantCode: wire.CodeProtocol, wantErr: wire.ErrMalformed},
		{name: "hello bad version", frame: badVersion, wantCode: wire.CodeVersion, wantErr: wire.ErrVersion},

		{name: "oversized before hello", brokerMax: 1024, frame: big, wantCode: wire.CodeFrameTooLarge, wantErr: wire.ErrFrameTooLarge},
		{name: "oversized batch", afterHello: true, brokerMax: 1024, frame: big, wantCode: wire.CodeFrameTooLarge, wantErr: wire.ErrFrameTooLarge},
		{name: "oversized garbage", brokerMax: 1024, frame: make([]byte, 1025), wantCode: wire.CodeFrameTooLarge, wantErr: wire.ErrFrameTooLarge},

		{name: "truncated batch", afterHello: true, frame: batch[:len(batch)-1], wantCode: wire.CodeProtocol, wantErr: wire.ErrTruncated},
		{name: "batch header cut", afterHello: true, frame: rawFrame(byte(wire.TypeBatch), batch[wire.HeaderSize:wire.BatchHeaderSize-1]...), wantCode: wire.CodeProtocol, wantErr: wire.ErrTruncated},
		{name: "flipped data byte", afterHello: true, frame: patched(batch, xorByte(-1, 1)), wantCode: wire.CodeChecksum, wantErr: wire.ErrChecksum},
		{name: "flipped crc", afterHello: true, frame: patched(batch, xorByte(offCRC, 0x80)), wantCode: wire.CodeChecksum, wantErr: wire.ErrChecksum},
		{name: "zstd flag on plain data", afterHello: true, frame: patched(batch, setByte(offCodec, byte(wire.CodecZstd))), wantCode: wire.CodeProtocol, wantErr: wire.ErrMalformed},
		{name: "codec unknown", afterHello: true, frame: patched(batch, setByte(offCodec, 9)), wantCode: wire.CodeUnsupportedCodec, wantErr: wire.ErrUnsupportedCodec},
		{name: "count above records", afterHello: true, frame: patched(batch, putU32(offCount, 4)), wantCode: wire.CodeProtocol, wantErr: wire.ErrMalformed},
		{name: "count below records", afterHello: true, frame: patched(batch, putU32(offCount, 2)), wantCode: wire.CodeProtocol, wantErr: wire.ErrMalformed},
		{name: "count zero", afterHello: true, frame: patched(batch, putU32(offCount, 0)), wantCode: wire.CodeProtocol, wantErr: wire.ErrMalformed},
		{name: "first seq zero", afterHello: true, frame: patched(batch, putU64(offFirstSeq, 0)), wantCode: wire.CodeProtocol, wantErr: wire.ErrMalformed},
		{name: "seq overflow", afterHello: true, frame: patched(batch, putU64(offFirstSeq, math.MaxUint64)), wantCode: wire.CodeProtocol, wantErr: wire.ErrMalformed},
		{name: "raw length mismatch", afterHello: true, frame: patched(batch, xorByte(offRawLen+3, 1)), wantCode: wire.CodeProtocol, wantErr: wire.ErrMalformed},
		{name: "non-minimal uvarint", afterHello: true, frame: rawBatch(1, 1, wire.CodecNone, 3, []byte{0x81, 0x00, 'a'}), wantCode: wire.CodeProtocol, wantErr: wire.ErrMalformed},
		{name: "record past the end", afterHello: true, frame: rawBatch(1, 2, wire.CodecNone, 4, []byte{1, 'a', 5, 'b'}), wantCode: wire.CodeProtocol, wantErr: wire.ErrMalformed},

		// Frames only a broker sends.
		{name: "HELLO_OK", frame: wire.AppendHelloOK(nil, wire.HelloOK{MaxFrameSize: wire.DefaultMaxFrameSize, Epoch: 1}), wantCode: wire.CodeProtocol},
		{name: "HELLO_OK after hello", afterHello: true, frame: wire.AppendHelloOK(nil, wire.HelloOK{MaxFrameSize: wire.DefaultMaxFrameSize, Epoch: 1}), wantCode: wire.CodeProtocol},
		{name: "RECEIPT", frame: wire.AppendReceipt(nil, wire.Receipt{Seq: 1}), wantCode: wire.CodeProtocol},
		{name: "RECEIPT after hello", afterHello: true, frame: wire.AppendReceipt(nil, wire.Receipt{Seq: 1}), wantCode: wire.CodeProtocol},

		{name: "ping short body", afterHello: true, frame: rawFrame(byte(wire.TypePing), 1, 2, 3), wantCode: wire.CodeProtocol, wantErr: wire.ErrTruncated},
		{name: "ping before hello", frame: wire.AppendPing(nil, wire.Ping{Nonce: 1}), wantCode: wire.CodeHelloRequired},
		{name: "ping long body", afterHello: true, frame: rawFrame(byte(wire.TypePing), make([]byte, 9)...), wantCode: wire.CodeProtocol, wantErr: wire.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []broker.Option
			if tt.brokerMax != 0 {
				opts = append(opts, broker.MaxFrameSize(tt.brokerMax))
			}
			b, store := newBroker(t, opts...)
			c := newConn(t, b)
			defer c.Close()
			if tt.afterHello {
				c.hello(t, "p")
			}

			reply, err := c.handle(t, tt.frame)
			require.ErrorIs(t, err, broker.ErrProtocol)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
			}
			e := errorFrame(t, reply)
			assert.Equal(t, tt.wantCode, e.Code, "ERROR text %q", e.Text)
			assert.NotEmpty(t, e.Text)
			assert.Empty(t, store.Producers(), "nothing stored")
			st := b.Stats()
			assert.Equal(t, uint64(1), st.ProtocolErrors)
			assert.Zero(t, st.Stored)
			assert.Zero(t, st.Batches)
		})
	}
}

// TestRandomGarbage feeds pseudo-random frames (a fixed seed, so the same
// ones every run), some with a consistent length prefix and a known type so
// that they reach the decoders.
func TestRandomGarbage(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	b, store := newBroker(t, broker.MaxFrameSize(4096))
	for i := range 2000 {
		frame := make([]byte, rng.IntN(80))
		for j := range frame {
			frame[j] = byte(rng.Uint32())
		}
		if len(frame) >= wire.HeaderSize && i%2 == 0 {
			binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
			frame[4] = byte(1 + rng.IntN(8)) // HELLO..PONG and one unknown
		}
		c := newConn(t, b)
		if i%3 == 0 {
			c.hello(t, "p")
		}
		reply, err := c.handle(t, frame)
		if err != nil {
			require.ErrorIs(t, err, broker.ErrProtocol, "frame %x", frame)
			assert.NotZero(t, errorFrame(t, reply).Code)
		} else {
			typ, terr := wire.TypeOf(reply)
			require.NoError(t, terr)
			assert.NotEqual(t, wire.TypeError, typ)
		}
		c.Close()
	}
	assert.Empty(t, store.Producers())
	assert.Zero(t, b.Stats().Sessions)
}
