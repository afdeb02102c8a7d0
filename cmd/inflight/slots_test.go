package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSlotsReuseOnlyFreed: get never hands out a slot before put freed it,
// steps over busy slots, and waits when every slot is busy until one is
// freed or ctx ends.
func TestSlotsReuseOnlyFreed(t *testing.T) {
	s := newSlots(3)
	ctx := context.Background()
	for want := range 3 {
		i, ok := s.get(ctx)
		require.True(t, ok)
		assert.Equal(t, want, i)
	}
	s.put(1) // 0 is still busy: stepped over
	i, ok := s.get(ctx)
	require.True(t, ok)
	assert.Equal(t, 1, i)

	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, ok = s.get(short)
	assert.False(t, ok, "every slot busy until ctx ended")

	var wg sync.WaitGroup
	got := make(chan int, 1)
	wg.Go(func() {
		i, _ := s.get(ctx)
		got <- i
	})
	time.Sleep(10 * time.Millisecond) // let get wait; it must still return after put
	s.put(2)
	wg.Wait()
	assert.Equal(t, 2, <-got)
}
