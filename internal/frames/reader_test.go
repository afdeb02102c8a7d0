package frames

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/wire"
)

// batchOf returns a BATCH frame with one record of n bytes.
func batchOf(n int) []byte {
	var bb wire.BatchBuilder
	bb.Reset(nil, 1)
	bb.Add(make([]byte, n))
	return bb.Finish()
}

// A large frame's buffer is not held for the connection's life: it is
// dropped once a small frame has been read after it, and kept while large
// frames follow each other.
func TestFrameReaderDropsLargeBuffer(t *testing.T) {
	const bufSize = 64 << 10
	var stream bytes.Buffer
	for _, n := range []int{3 << 20, 3 << 20, 10, 10, 3 << 20} {
		stream.Write(batchOf(n))
	}
	f := NewReader(&stream, bufSize, 4<<20, NoWait{})

	frame, err := f.Next()
	require.NoError(t, err)
	require.Greater(t, len(frame), 3<<20)
	first := &f.big[:1][0]
	_, err = f.Next() // the second large frame, already arriving: same buffer
	require.NoError(t, err)
	require.Same(t, first, &f.big[:1][0], "a run of large frames reallocated the buffer")

	_, err = f.Next() // small, right after a large one
	require.NoError(t, err)
	_, err = f.Next() // small after small: the large buffer goes
	require.NoError(t, err)
	require.Equal(t, bufSize, f.Held())

	_, err = f.Next() // a large frame again grows it
	require.NoError(t, err)
	require.Greater(t, f.Held(), 3<<20)
	_, err = f.Next()
	require.ErrorIs(t, err, io.EOF)
}

// Frames up to the producer's default batch size keep their buffer.
func TestFrameReaderKeepsDefaultBatchBuffer(t *testing.T) {
	var stream bytes.Buffer
	stream.Write(batchOf(1 << 20))
	stream.Write(batchOf(10))
	stream.Write(batchOf(10))
	f := NewReader(&stream, 64<<10, 4<<20, NoWait{})
	for range 3 {
		_, err := f.Next()
		require.NoError(t, err)
	}
	require.Greater(t, f.Held(), 1<<20)
}
