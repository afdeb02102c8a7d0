package core

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/transport"
)

// TestBufPoolTakesTheLastBack: get hands out the buffer that came back
// last (the one in cache), makes one when none came back, keeps at most
// its bound, and big buffers only up to its byte bound.
func TestBufPoolTakesTheLastBack(t *testing.T) {
	bp := newBufPool(6, 2<<20)
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
	// Kept: big 0 and 1 (2 MiB), small 3-5; big 2 dropped.
	assert.Same(t, bufs[5], bp.get(), "the last one back first")
	assert.Same(t, bufs[4], bp.get())
	assert.Same(t, bufs[3], bp.get())
	assert.Same(t, bufs[1], bp.get(), "big ones only up to the byte bound")
	assert.Same(t, bufs[0], bp.get())
	assert.NotContains(t, bufs, bp.get(), "none kept: a new one")

	b := bp.get()
	bp.put(b)
	assert.Same(t, b, bp.get(), "an unused buffer put back is the next")
}

// TestBufPoolCountsBigBytes: the byte bound counts the big buffers on the
// stack, by their capacity: a big buffer taken out makes room for another,
// and small ones never count.
func TestBufPoolCountsBigBytes(t *testing.T) {
	bp := newBufPool(16, 3*bigBuffer)
	sized := func(c int) *transport.Buffer {
		return &transport.Buffer{Bytes: make([]byte, 0, c), Owner: bp.back}
	}
	a, b, c := sized(2*bigBuffer), sized(bigBuffer+1), sized(bigBuffer)
	a.Release()
	b.Release() // with a, over the bound: dropped
	c.Release() // small: kept, and not counted
	assert.Same(t, c, bp.get())
	assert.Equal(t, 2*bigBuffer, bp.big)
	assert.Same(t, a, bp.get())
	assert.Zero(t, bp.big, "nothing big on the stack")

	d := sized(2 * bigBuffer)
	d.Release()
	b.Release() // with d, over the bound: dropped
	a.Release() // with d, over the bound: dropped
	c.Release()
	assert.Same(t, c, bp.get())
	assert.Same(t, d, bp.get(), "a taken out made room for d")
	assert.NotContains(t, []*transport.Buffer{a, b, c, d}, bp.get(), "the big ones over the bound were dropped")
	bp.put(b)
	assert.Equal(t, bigBuffer+1, bp.big, "put counts as a buffer come back")
}
