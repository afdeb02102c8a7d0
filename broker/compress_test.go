package broker_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/wire"
)

// TestCompressedBatchesStored: batches of every codec are decompressed and
// stored record by record.
func TestCompressedBatchesStored(t *testing.T) {
	b, store := newBroker(t)
	c := newConn(t, b)
	c.hello(t, "p")
	first := uint64(1)
	for _, codec := range []wire.Codec{wire.CodecZstd, wire.CodecS2, wire.CodecSnappy} {
		cp, err := wire.NewCompressor(codec, wire.LevelDefault)
		require.NoError(t, err)
		var bb wire.BatchBuilder
		bb.Reset(nil, 0, first)
		for i := range 100 {
			bb.Add(bytes.Repeat([]byte{byte('a' + i%26)}, 50))
		}
		frame, compressed := bb.FinishCompressed(cp, nil)
		require.True(t, compressed)
		reply, err := c.handle(t, frame)
		require.NoError(t, err)
		assert.Equal(t, first+99, receipt(t, reply))
		first += 100
		cp.Close()
	}
	recs := store.Records("p")
	require.Len(t, recs, 300)
	for i, r := range recs {
		assert.Equal(t, bytes.Repeat([]byte{byte('a' + i%100%26)}, 50), r.Payload)
	}
}

// TestDecompressionBombRejected: a batch that claims, or expands to, more
// than the frame limit is refused with an ERROR frame, without allocating
// past the limit, and closes that session only.
func TestDecompressionBombRejected(t *testing.T) {
	const limit = 64 << 10
	zeros := make([]byte, 8<<20) // 128 times the limit
	var bb wire.BatchBuilder
	bb.Reset(nil, 0, 1)
	bb.Add(zeros)
	raw := bb.Bytes()[wire.BatchHeaderSize:]
	for _, codec := range []wire.Codec{wire.CodecZstd, wire.CodecS2} {
		cp, err := wire.NewCompressor(codec, wire.LevelDefault)
		require.NoError(t, err)
		data := cp.Append(nil, raw)
		cp.Close()
		require.Less(t, len(data), limit, "the bomb itself fits in a frame")
		for _, tc := range []struct {
			name   string
			rawLen uint32
			code   wire.ErrorCode
		}{
			{"claims its true size", uint32(len(raw)), wire.CodeFrameTooLarge},
			{"lies about its size", limit / 2, wire.CodeProtocol},
		} {
			t.Run(codec.String()+"/"+tc.name, func(t *testing.T) {
				b, store := newBroker(t, broker.MaxFrameSize(limit))
				good := newConn(t, b)
				good.hello(t, "good")
				c := newConn(t, b)
				c.hello(t, "bomber")
				frame := bombFrame(codec, tc.rawLen, data)

				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				reply, err := c.handle(t, frame)
				runtime.ReadMemStats(&after)

				require.ErrorIs(t, err, broker.ErrProtocol)
				assert.Equal(t, tc.code, errorFrame(t, reply).Code)
				assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4*limit), "allocated while refusing the bomb")
				assert.Zero(t, store.Len("bomber"))
				assert.Equal(t, uint64(3), good.send(t, 0, 1, 3), "another session is unaffected")
			})
		}
	}
}

// bombFrame is a BATCH of one record whose data is compressed with codec
// and whose header claims rawLen, with a valid CRC.
func bombFrame(codec wire.Codec, rawLen uint32, data []byte) []byte {
	f := make([]byte, wire.BatchHeaderSize, wire.BatchHeaderSize+len(data))
	f = append(f, data...)
	binary.BigEndian.PutUint32(f, uint32(len(f)-4))
	f[4] = byte(wire.TypeBatch)
	binary.BigEndian.PutUint32(f[5:], 0) // topic id 0
	binary.BigEndian.PutUint64(f[9:], 1)
	binary.BigEndian.PutUint32(f[17:], 1)
	f[21] = byte(codec)
	binary.BigEndian.PutUint32(f[22:], rawLen)
	binary.BigEndian.PutUint32(f[26:], crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)))
	return f
}
