package broker

import (
	"slices"
	"sync"
	"time"

	"github.com/inflightmq/inflight/wire"
)

// Record is one record as a Store sees it: the sequence ID the producer
// assigned, the payload and its metadata. Records handed to a Store are views
// into the broker's frame buffer, valid only during the call; a store that
// keeps them must copy every slice (and the header values).
type Record struct {
	Seq       uint64
	Payload   []byte
	Key       []byte        // nil when the producer set none
	Headers   []wire.Header // ordered; keys may repeat; nil when none
	EventTime time.Time     // zero when the producer set none
}

// MemoryStore is a Store that keeps every record in memory, for tests and
// demos. It can be inspected at any time and is safe for concurrent use.
// Reusing one MemoryStore for a new Broker simulates a broker restart that
// kept its data.
type MemoryStore struct {
	mu        sync.RWMutex
	logs      map[string][]Record
	appendErr error
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{logs: make(map[string][]Record)} }

// LastSeq implements Store.
func (m *MemoryStore) LastSeq(producer string) (uint64, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	log := m.logs[producer]
	if len(log) == 0 {
		return 0, nil
	}
	return log[len(log)-1].Seq, nil
}

// Append implements Store. It copies the records into one allocation.
func (m *MemoryStore) Append(producer string, first uint64, records [][]byte) error {
	n := 0
	for _, r := range records {
		n += len(r)
	}
	arena := make([]byte, 0, n)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.appendErr != nil {
		return m.appendErr
	}
	if len(records) == 0 {
		return nil // no entry: Producers lists only producers with records
	}
	log := m.logs[producer]
	for i, r := range records {
		start := len(arena)
		arena = append(arena, r...)
		log = append(log, Record{Seq: first + uint64(i), Payload: arena[start:len(arena):len(arena)]})
	}
	m.logs[producer] = log
	return nil
}

// FailAppends makes every later Append return err (nil restores normal
// operation). For tests of the broker's store-failure path.
func (m *MemoryStore) FailAppends(err error) {
	m.mu.Lock()
	m.appendErr = err
	m.mu.Unlock()
}

// Records returns a copy of the records stored for producer, in order. The
// payloads are shared with the store and must not be modified.
func (m *MemoryStore) Records(producer string) []Record {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Clone(m.logs[producer])
}

// Len returns the number of records stored for producer.
func (m *MemoryStore) Len(producer string) int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.logs[producer])
}

// Producers returns the names of the producers with stored records, sorted.
func (m *MemoryStore) Producers() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	names := make([]string, 0, len(m.logs))
	for name := range m.logs {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// CountingStore is a Store that keeps only the last sequence ID and a record
// count per producer: what a benchmark needs without the memory of a
// MemoryStore. It is safe for concurrent use.
type CountingStore struct {
	mu   sync.Mutex
	last map[string]uint64
	n    map[string]uint64
}

// NewCountingStore returns an empty CountingStore.
func NewCountingStore() *CountingStore {
	return &CountingStore{last: make(map[string]uint64), n: make(map[string]uint64)}
}

// LastSeq implements Store.
func (c *CountingStore) LastSeq(producer string) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last[producer], nil
}

// Append implements Store.
func (c *CountingStore) Append(producer string, first uint64, records [][]byte) error {
	if len(records) == 0 {
		return nil
	}
	c.mu.Lock()
	c.last[producer] = first + uint64(len(records)) - 1
	c.n[producer] += uint64(len(records))
	c.mu.Unlock()
	return nil
}

// Count returns the number of records appended for producer.
func (c *CountingStore) Count(producer string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[producer]
}
