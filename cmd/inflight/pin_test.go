package main

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
)

// pinStore is a Store that counts the pins it is given.
type pinStore struct {
	broker.Store
	pins map[string]int
}

func (s *pinStore) Pin(producer string)   { s.pins[producer]++ }
func (s *pinStore) Unpin(producer string) { s.pins[producer]-- }

// TestHealthStorePassesPins: serve's healthStore, between the broker and
// the store, passes Pin and Unpin on to a store that forgets idle names,
// and does nothing with one that does not.
func TestHealthStorePassesPins(t *testing.T) {
	s := &pinStore{Store: broker.NewMemoryStore(), pins: map[string]int{}}
	var h broker.Store = &healthStore{Store: s}
	p, ok := h.(broker.Pinner)
	assert.True(t, ok)
	p.Pin("till-1")
	p.Pin("till-1")
	p.Unpin("till-1")
	assert.Equal(t, 1, s.pins["till-1"])
	(&healthStore{Store: broker.NewMemoryStore()}).Pin("till-1") // no Pinner: nothing to do
}

// failFrames is a pinStore that takes frames and fails every AppendFrames
// with err.
type failFrames struct {
	*pinStore
	err error
}

func (s failFrames) AppendFrames(string, string, uint64, []broker.Frame) error { return s.err }

// TestHealthStorePassesFrames: the broker sees serve's healthStore as a
// broker.FrameAppender exactly when the store under it is one, and a
// failed AppendFrames makes the store unhealthy as a failed Append does.
func TestHealthStorePassesFrames(t *testing.T) {
	plain := &healthStore{Store: broker.NewMemoryStore()}
	_, ok := plain.forBroker().(broker.FrameAppender)
	assert.False(t, ok, "a memory store takes no frames")

	diskFull := errors.New("disk full")
	pins := &pinStore{Store: broker.NewMemoryStore(), pins: map[string]int{}}
	h := &healthStore{Store: failFrames{pinStore: pins, err: diskFull}}
	fa, ok := h.forBroker().(broker.FrameAppender)
	require.True(t, ok)
	h.forBroker().(broker.Pinner).Pin("till-1")
	assert.Equal(t, 1, pins.pins["till-1"], "the pins pass through as well")
	require.NoError(t, h.health())
	require.ErrorIs(t, fa.AppendFrames("t", "p", 1, nil), diskFull)
	require.ErrorIs(t, h.health(), diskFull)
}
