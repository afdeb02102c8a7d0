package core_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/clock"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/wire"
)

var codecs = []struct {
	codec wire.Codec
	level wire.Level
}{
	{wire.CodecNone, wire.LevelFastest},
	{wire.CodecZstd, wire.LevelFastest},
	{wire.CodecZstd, wire.LevelDefault},
	{wire.CodecZstd, wire.LevelBetter},
	{wire.CodecS2, wire.LevelDefault},
	{wire.CodecS2, wire.LevelBetter},
	{wire.CodecSnappy, wire.LevelDefault},
}

// TestBatchingPreservesOrderAcrossReconnect: with batches of many messages,
// compression, linger, and every connection cut after a few frames, order
// and exactly-once storage hold.
func TestBatchingPreservesOrderAcrossReconnect(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []core.Option
	}{
		{"natural", nil},
		{"linger", []core.Option{core.Linger(time.Millisecond)}},
		{"zstd", []core.Option{core.Compression(wire.CodecZstd, wire.LevelFastest)}},
		{"s2+linger", []core.Option{core.Compression(wire.CodecS2, wire.LevelDefault), core.Linger(time.Millisecond)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := append([]core.Option{core.SendTimeout(time.Minute), core.MaxPending(2048), core.MaxPendingPerTopic(2048), core.MaxBatchMessages(256)}, tc.opts...)
			e := newEnv(t, opts...)
			e.dialer.DropAfterFrames(4) // HELLO + 3 batches per connection
			const n = 20000
			rec := newRecorder(n)
			for i := range n {
				// Compressible payloads, so the codecs really compress.
				p := fmt.Appendf(nil, `{"i":%d,"name":"message","pad":"xxxxxxxxxxxxxxxx"}`, i)
				require.NoError(t, e.p.SendAsync(context.Background(), &core.Message{Payload: p}, rec.cb(i)))
			}
			rec.wait(t)
			require.Len(t, rec.order, n)
			for k, i := range rec.order {
				require.Equal(t, k, i, "success %d out of order", k)
			}
			recs := e.store.Records("test-producer")
			require.Len(t, recs, n)
			for i, r := range recs {
				require.Equal(t, fmt.Sprintf(`{"i":%d,`, i), string(r.Payload[:bytes.IndexByte(r.Payload, ',')+1]), "record %d", i)
			}
			st := e.p.Stats()
			assert.Greater(t, st.Reconnects, uint64(5))
			assert.Greater(t, st.MessagesPerBatch(), 2.0)
			t.Logf("%d batches, %.1f messages per batch, %d reconnects, compression ratio %.1f",
				st.Batches, st.MessagesPerBatch(), st.Reconnects, st.CompressionRatio())
		})
	}
}

// TestCompressionRoundTrip sends payloads of every kind through every codec
// and checks the broker stores exactly what was sent.
func TestCompressionRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	const maxBatch = 64 << 10
	payloads := [][]byte{
		{},
		{42},
		random(100),
		bytes.Repeat([]byte("compressible "), 500),
		random(1000),
		bytes.Repeat([]byte{0}, maxBatch-wire.BatchHeaderSize-wire.RecordOverhead(maxBatch)), // a batch of exactly MaxBatchBytes
		random(maxBatch * 2), // larger than a batch: travels alone
	}
	for _, c := range codecs {
		t.Run(fmt.Sprintf("%v-%v", c.codec, c.level), func(t *testing.T) {
			e := newEnv(t, core.Compression(c.codec, c.level), core.MaxBatchBytes(maxBatch))
			rec := newRecorder(len(payloads) * 3)
			for round := range 3 {
				for i, p := range payloads {
					require.NoError(t, e.p.SendAsync(context.Background(), &core.Message{Payload: p}, rec.cb(round*len(payloads)+i)))
				}
			}
			rec.wait(t)
			recs := e.store.Records("test-producer")
			require.Len(t, recs, len(payloads)*3)
			for k, rr := range recs {
				require.Equal(t, payloads[k%len(payloads)], rr.Payload, "record %d", k)
			}
			st := e.p.Stats()
			if c.codec != wire.CodecNone {
				assert.Less(t, st.BytesWire, st.BytesRaw, "something was compressed")
			} else {
				assert.Equal(t, st.BytesWire, st.BytesRaw)
			}
		})
	}
}

func TestCompressionOptionRejectsUnknown(t *testing.T) {
	_, err := core.New(nil, core.Compression(wire.Codec(9), wire.LevelDefault))
	assert.ErrorIs(t, err, core.ErrInvalidOption)
	e := newEnv(t)
	_, err = core.New(e.dialer, core.Compression(wire.CodecZstd, wire.Level(5)))
	assert.ErrorIs(t, err, core.ErrInvalidOption)
	_, err = core.New(e.dialer, core.Linger(-time.Second))
	assert.ErrorIs(t, err, core.ErrInvalidOption)
}

// TestLingerWaitsForAFramesWorth: under Linger, once a topic's frame was
// closed by its byte bound, the next frame leaves as soon as as many
// messages as that frame held are published, without waiting out the
// linger again for MaxBatchMessages of them (with 1 KiB messages and the
// defaults that was 4096 before each frame of about 1000). The producer's
// clock moves until the first frame leaves, then stands still: only a
// frame that needs no linger can follow.
func TestLingerWaitsForAFramesWorth(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	const linger = time.Hour
	e := newEnv(t, core.WithClock(clk), core.Linger(linger), core.MaxBatchBytes(4096),
		core.Heartbeat(time.Hour), core.SendTimeout(24*time.Hour))
	// Four records of 1000 B fill a frame of 4096 bytes: two frames.
	for i := range 8 {
		require.NoError(t, e.p.SendAsync(context.Background(), &core.Message{Payload: bytes.Repeat([]byte{byte(i)}, 1000)},
			func(core.MessageID, *core.Message, error) {}))
	}
	sent := func() bool { return e.p.Stats().Batches > 0 }
	waitUntil(t, "the first frame, after a linger", func() bool {
		// The pump may set its linger after an Advance: again, until a
		// frame leaves. Each Advance waits a while for it, so that one
		// does not also pass a linger the pump set after that frame.
		clk.Advance(linger)
		for deadline := time.Now().Add(100 * time.Millisecond); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if sent() {
				return true
			}
		}
		return false
	})
	waitUntil(t, "the second frame, without a linger", func() bool { return e.p.Stats().Sent == 8 })
	assert.Equal(t, uint64(2), e.p.Stats().Batches)
}
