package core

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/transport"
)

// TestBufPoolTakesTheLastBack: get hands out the buffer that came back
// last (the one in cache), makes one when none came back, keeps at most
// its bound, and beyond its few only small buffers.
func TestBufPoolTakesTheLastBack(t *testing.T) {
	bp := newBufPool(6, 2)
	made := bp.get()
	require.NotNil(t, made)
	assert.Equal(t, (chan<- *transport.Buffer)(bp.back), made.Owner, "a buffer of the pool")

	bufs := make([]*transport.Buffer, 8)
	for i := range bufs {
		bufs[i] = bp.get()
		size := 100
		if i < 3 {
			size = 1 << 20 // the first three are big
		}
		bufs[i].Bytes = make([]byte, 0, size)
	}
	for _, b := range bufs {
		b.Release()
	}
	// Back: big 0-2, small 3-5 (the channel holds 6; 6 and 7 dropped).
	// Kept: big 0 and 1 (the few), small 3-5; big 2 dropped.
	assert.Same(t, bufs[5], bp.get(), "the last one back first")
	assert.Same(t, bufs[4], bp.get())
	assert.Same(t, bufs[3], bp.get())
	assert.Same(t, bufs[1], bp.get(), "big ones only up to the few")
	assert.Same(t, bufs[0], bp.get())
	assert.NotContains(t, bufs, bp.get(), "none kept: a new one")

	b := bp.get()
	bp.put(b)
	assert.Same(t, b, bp.get(), "an unused buffer put back is the next")
}
