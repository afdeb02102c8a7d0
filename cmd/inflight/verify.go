package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync"

	"github.com/inflightmq/inflight/broker"
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
// checks, as records arrive, what the demo must prove about the broker side,
// per topic (sequence IDs, order and dedup are per topic): no sequence ID
// stored twice, records stored in send order (each payload starts with the
// sender's message index), and each record's topic, key and header as the
// sender made them from that index (see demoTopicOf, demoMeta).
type checkStore struct {
	mu         sync.Mutex
	stored     map[string]*bitset // by topic, by sequence ID
	last       map[[2]string]uint64
	epochs     map[string]uint64    // by producer name
	lastIndex  map[[2]string]uint64 // message index of the newest record + 1
	records    uint64
	duplicates uint64 // a sequence ID stored again
	disorder   uint64 // a record whose index is not above the previous one
	badMeta    uint64 // a record on another topic, or whose key or headers are not what was sent
}

func newCheckStore() *checkStore {
	return &checkStore{stored: make(map[string]*bitset), last: make(map[[2]string]uint64), epochs: make(map[string]uint64), lastIndex: make(map[[2]string]uint64)}
}

func (s *checkStore) State(topic, producer string) (broker.NameState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [2]string{topic, producer}
	return broker.NameState{LastSeq: s.last[k], Epoch: s.epochs[producer]}, nil
}

func (s *checkStore) Fence(producer string, epoch uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if epoch <= s.epochs[producer] {
		return fmt.Errorf("%w: epoch %d, stored %d", broker.ErrFenced, epoch, s.epochs[producer])
	}
	s.epochs[producer] = epoch
	return nil
}

func (s *checkStore) Append(topic, producer string, epoch uint64, recs []broker.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [2]string{topic, producer}
	if epoch < s.epochs[producer] {
		return fmt.Errorf("%w: epoch %d, stored %d", broker.ErrFenced, epoch, s.epochs[producer])
	}
	stored := s.stored[topic]
	if stored == nil {
		stored = new(bitset)
		s.stored[topic] = stored
	}
	for _, r := range recs {
		if stored.set(r.Seq) {
			s.duplicates++
		}
		if len(r.Payload) >= 8 {
			idx := binary.BigEndian.Uint64(r.Payload)
			if idx+1 <= s.lastIndex[k] {
				s.disorder++
			}
			s.lastIndex[k] = idx + 1
			if topic != demoTopics[demoTopicOf(idx)] || !demoMetaMatches(idx, r) {
				s.badMeta++
			}
		} else {
			s.badMeta++
		}
		s.records++
		s.last[k] = max(s.last[k], r.Seq)
	}
	return nil
}

// demoTopics are the topics the demo's one producer writes, over one
// connection: message idx goes to demoTopics[demoTopicOf(idx)].
var demoTopics = [...]string{"demo.orders", "demo.payments", "demo.audit"}

// demoTopicOf is the index in demoTopics of message idx's topic: round
// robin.
func demoTopicOf(idx uint64) int { return int(idx % uint64(len(demoTopics))) }

// demoHeader is the key of the header every demo message carries.
const demoHeader = "demo-check"

// demoMeta fills the key and the header value of the message with index idx
// (key: 8 bytes, header value: 4 bytes), reusing their buffers.
func demoMeta(idx uint64, key, headerValue []byte) {
	binary.BigEndian.PutUint64(key, idx^0x5a5a5a5a5a5a5a5a)
	binary.BigEndian.PutUint32(headerValue, uint32(idx*2654435761))
}

// demoMetaMatches reports whether r carries the key and the one header
// demoMeta makes for idx.
func demoMetaMatches(idx uint64, r broker.Record) bool {
	var key [8]byte
	var val [4]byte
	demoMeta(idx, key[:], val[:])
	return bytes.Equal(r.Key, key[:]) && len(r.Headers) == 1 &&
		r.Headers[0].Key == demoHeader && bytes.Equal(r.Headers[0].Value, val[:])
}

// snapshot returns the counters.
func (s *checkStore) snapshot() (records, duplicates, disorder, badMeta uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.records, s.duplicates, s.disorder, s.badMeta
}

// missing counts the successes the store does not hold: successes[i]
// holds the sequence IDs of topic demoTopics[i].
func (s *checkStore) missing(successes []bitset) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n uint64
	for i, topic := range demoTopics {
		var stored bitset
		if p := s.stored[topic]; p != nil {
			stored = *p
		}
		successes[i].each(func(seq uint64) {
			if !stored.has(seq) {
				n++
			}
		})
	}
	return n
}
