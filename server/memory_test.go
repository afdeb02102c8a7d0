package server_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/server"
	"github.com/inflightmq/inflight/wire"
)

// discardStore stores nothing: what the broker holds is all that counts.
type discardStore struct{}

func (discardStore) State(string, string) (broker.NameState, error)       { return broker.NameState{}, nil }
func (discardStore) Fence(string, uint64) error                           { return nil }
func (discardStore) Append(string, string, uint64, []broker.Record) error { return nil }

// bombFrame is a BATCH of a few hundred bytes, zstd-compressed, whose
// records (4,000 of 1,000 bytes) decode to nearly the default frame limit,
// 4 MiB.
func bombFrame(t *testing.T) []byte {
	t.Helper()
	var bb wire.BatchBuilder
	bb.Reset(nil, 0, 1)
	rec := make([]byte, 1000)
	for bb.Size()+wire.RecordOverhead(len(rec))+len(rec) <= wire.DefaultMaxFrameSize-64 {
		bb.Add(rec)
	}
	c, err := wire.NewCompressor(wire.CodecZstd, wire.LevelBetter)
	require.NoError(t, err)
	defer c.Close()
	f, ok := bb.FinishCompressed(c, nil)
	require.True(t, ok)
	b, err := wire.DecodeBatch(f)
	require.NoError(t, err)
	require.Greater(t, int(b.RawLen), 4<<20-4<<10)
	return f
}

// liveBytes returns the heap in use and the goroutine stacks after a
// garbage collection (two: pools keep what they drop for one cycle).
func liveBytes() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc + m.StackInuse
}

// Per-connection bounds that TestRetainedMemoryBounded checks: what a
// connection holds between frames, broker and the test's own client end
// together (README.md states the broker's share, measured apart by
// bench/hostile).
const (
	retainedPlain = 32 << 10
	retainedTLS   = 64 << 10
)

// TestRetainedMemoryBounded: hundreds of connections each send HELLO, one
// bomb-shaped BATCH (a zstd frame of a few hundred bytes whose records
// decode to 4 MiB), then PINGs; between frames the
// broker holds a few KiB for each, not the frame: the live heap and stacks
// grow by less than the stated bound per connection, and the broker's frame
// memory is all given back.
func TestRetainedMemoryBounded(t *testing.T) {
	bomb := bombFrame(t)
	t.Logf("bomb: %d bytes on the wire", len(bomb))
	for _, tc := range []struct {
		name  string
		tls   bool
		conns int
		bound uint64
	}{
		{"plain", false, 200, retainedPlain},
		{"tls", true, 100, retainedTLS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := broker.New(discardStore{})
			require.NoError(t, err)
			e := &env{broker: b}
			var opts []server.Option
			if tc.tls {
				e.ca = newCA(t)
				cfg, err := e.ca.ServerConfig()
				require.NoError(t, err)
				opts = append(opts, server.TLS(cfg), server.HandshakeTimeout(waitTimeout))
			}
			e.server, err = server.New("127.0.0.1:0", b, opts...)
			require.NoError(t, err)
			defer e.server.Close(context.Background())

			ping := wire.AppendPing(nil, wire.Ping{Nonce: 1})
			serve := func(i int) {
				r := dialRaw(t, e)
				r.hello(fmt.Sprint("bomber-", i))
				r.write(bomb)
				typ, err := wire.TypeOf(r.read())
				require.NoError(t, err)
				require.Equal(t, wire.TypeReceipt, typ)
				r.write(ping)
				typ, err = wire.TypeOf(r.read())
				require.NoError(t, err)
				require.Equal(t, wire.TypePong, typ)
			}
			// The receipt may come before the appender let go of the
			// frame: wait until its charge is back (see budget.go), and
			// until the broker counted the frames, which it does just
			// after it handed their receipts on.
			settled := func(batches uint64) {
				waitUntil(t, "the frame memory given back", func() bool { return b.Stats().BufferedBytes == 0 })
				waitUntil(t, fmt.Sprint(batches, " batches counted"), func() bool { return b.Stats().Batches >= batches })
			}
			serve(-1) // warm up: the decoder, the pools, the listener
			settled(1)
			before := liveBytes()
			for i := range tc.conns {
				serve(i)
			}
			settled(uint64(tc.conns + 1))
			after := liveBytes()
			require.Equal(t, tc.conns+1, e.server.Stats().Conns)
			per := (after - min(after, before)) / uint64(tc.conns)
			t.Logf("%d connections: live heap and stacks %d -> %d KiB, %d bytes per connection (bound %d)",
				tc.conns, before>>10, after>>10, per, tc.bound)
			assert.Less(t, per, tc.bound, "bytes held per connection between frames")
			assert.Equal(t, uint64(tc.conns+1), b.Stats().Batches)
		})
	}
}
