package broker

import (
	"math/bits"
	"sync"
)

// bufPool holds the buffers queued frames are copied into, in size classes:
// powers of two from 1<<minBufShift to the frame limit (bufSize). A frame's buffer
// is what it is charged for (see budget.go). Buffers not of a class are left
// to the garbage collector.
type bufPool struct {
	classes []sync.Pool // of *[]byte; classes[i] holds buffers of 1<<(minBufShift+i) bytes
}

const minBufShift = 9 // the smallest class: 512 bytes

// bufSize returns the size of the buffer that holds n bytes.
func bufSize(n int) int {
	return 1 << max(bits.Len(uint(max(n, 1)-1)), minBufShift)
}

func newBufPool(maxFrame int) bufPool {
	return bufPool{classes: make([]sync.Pool, bufClass(bufSize(maxFrame))+1)}
}

func bufClass(size int) int { return bits.Len(uint(size-1)) - minBufShift }

// get returns an empty buffer of capacity bufSize(n).
func (p *bufPool) get(n int) *[]byte {
	size := bufSize(n)
	if c := bufClass(size); c < len(p.classes) {
		if b, ok := p.classes[c].Get().(*[]byte); ok {
			return b
		}
	}
	b := make([]byte, 0, size)
	return &b
}

// put returns b (nil is ignored).
func (p *bufPool) put(b *[]byte) {
	if b == nil {
		return
	}
	size := cap(*b)
	if size != bufSize(size) || bufClass(size) >= len(p.classes) {
		return
	}
	*b = (*b)[:0]
	p.classes[bufClass(size)].Put(b)
}
