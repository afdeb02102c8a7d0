package main

import (
	"encoding/binary"
	"math/bits"
	"sync"
)

// bitset is a growable set of small non-negative integers.
type bitset []uint64

// set adds i and reports whether it was already there.
func (b *bitset) set(i uint64) (was bool) {
	w := i / 64
	for uint64(len(*b)) <= w {
		*b = append(*b, 0)
	}
	mask := uint64(1) << (i % 64)
	was = (*b)[w]&mask != 0
	(*b)[w] |= mask
	return was
}

func (b bitset) has(i uint64) bool {
	w := i / 64
	return w < uint64(len(b)) && b[w]&(1<<(i%64)) != 0
}

// each calls fn for every member, in increasing order.
func (b bitset) each(fn func(i uint64)) {
	for w, word := range b {
		for word != 0 {
			bit := uint64(bits.TrailingZeros64(word))
			fn(uint64(w)*64 + bit)
			word &^= 1 << bit
		}
	}
}

// checkStore is the demo's broker store: instead of keeping payloads it
// checks, as records arrive, what the demo must prove about the broker side:
// no sequence ID stored twice, and records stored in send order (each
// payload starts with the sender's message index).
type checkStore struct {
	mu         sync.Mutex
	stored     bitset // by sequence ID
	last       map[string]uint64
	lastIndex  map[string]uint64 // message index of the newest record + 1
	records    uint64
	duplicates uint64 // a sequence ID stored again
	disorder   uint64 // a record whose index is not above the previous one
}

func newCheckStore() *checkStore {
	return &checkStore{last: make(map[string]uint64), lastIndex: make(map[string]uint64)}
}

func (s *checkStore) LastSeq(producer string) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last[producer], nil
}

func (s *checkStore) Append(producer string, first uint64, records [][]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range records {
		seq := first + uint64(i)
		if s.stored.set(seq) {
			s.duplicates++
		}
		if len(r) >= 8 {
			idx := binary.BigEndian.Uint64(r) + 1
			if idx <= s.lastIndex[producer] {
				s.disorder++
			}
			s.lastIndex[producer] = idx
		}
		s.records++
		s.last[producer] = max(s.last[producer], seq)
	}
	return nil
}

// snapshot returns the counters.
func (s *checkStore) snapshot() (records, duplicates, disorder uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.records, s.duplicates, s.disorder
}

// missing counts the members of successes the store does not hold.
func (s *checkStore) missing(successes bitset) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n uint64
	successes.each(func(seq uint64) {
		if !s.stored.has(seq) {
			n++
		}
	})
	return n
}
