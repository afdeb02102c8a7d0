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
	bb.Reset(nil, 0, 1)
	bb.Add(make([]byte, n))
	return bb.Finish()
}

// A large frame's buffer is held only until the next call to Next: between
// frames a Reader holds its buffer alone, whatever the frames before, and
// every frame reads back whole.
func TestFrameReaderReleasesLargeBuffer(t *testing.T) {
	const bufSize = 4 << 10
	sizes := []int{3 << 20, 3 << 20, 10, 1 << 20, 10, 1 << 20, 1 << 20, 10}
	var stream bytes.Buffer
	var want [][]byte
	for i, n := range sizes {
		f := batchOf(n)
		f[len(f)-1] = byte(i) // tell the frames apart
		want = append(want, f)
		stream.Write(f)
	}
	f := NewReader(&stream, bufSize, 4<<20, NoWait{})
	require.Equal(t, bufSize, f.Held())
	for i := range sizes {
		frame, err := f.Next()
		require.NoError(t, err)
		require.Equal(t, want[i], frame, "frame %d", i)
		if len(frame) > bufSize {
			require.GreaterOrEqual(t, f.Held(), bufSize+len(frame), "frame %d", i)
		} else {
			require.Equal(t, bufSize, f.Held(), "frame %d: a large buffer held past its frame", i)
		}
	}
	_, err := f.Next()
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, bufSize, f.Held())
}

// Keep takes a large frame's buffer from the reader: the frames that
// follow never write over it, however many; a frame in the reader's own
// buffer cannot be kept.
func TestFrameReaderKeep(t *testing.T) {
	var stream bytes.Buffer
	large := batchOf(64 << 10)
	large[len(large)-1] = 7 // a byte of its own, to check afterwards
	stream.Write(large)
	for range 4 {
		stream.Write(batchOf(64 << 10))
	}
	stream.Write(batchOf(10))
	f := NewReader(&stream, 4<<10, 4<<20, NoWait{})

	first, err := f.Next()
	require.NoError(t, err)
	keep := f.Keep()
	require.NotNil(t, keep, "a large frame can be kept")
	require.Nil(t, f.Keep(), "kept once")
	held := first
	for range 4 {
		_, err := f.Next()
		require.NoError(t, err)
	}
	require.Equal(t, large, held, "a kept frame is not reused by the frames after it")
	small, err := f.Next()
	require.NoError(t, err)
	require.Len(t, small, len(batchOf(10)))
	require.Nil(t, f.Keep(), "a frame in the reader's buffer cannot be kept")
	keep()
}
