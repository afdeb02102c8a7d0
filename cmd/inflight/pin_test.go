package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

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
