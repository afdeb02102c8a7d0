package broker

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	"github.com/inflightmq/inflight/wire"
)

// MemoryStore is a Store that keeps every record in memory, for tests and
// demos. It can be inspected at any time and is safe for concurrent use.
// Reusing one MemoryStore for a new Broker simulates a broker restart that
// kept its data.
type MemoryStore struct {
	mu        sync.RWMutex
	logs      map[stream][]Record
	epochs    map[string]uint64 // per producer name, over all its topics
	appendErr error
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{logs: make(map[stream][]Record), epochs: make(map[string]uint64)}
}

// State implements Store.
func (m *MemoryStore) State(topic, producer string) (NameState, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.stateLocked(stream{topic, producer}), nil
}

func (m *MemoryStore) stateLocked(k stream) NameState {
	st := NameState{Epoch: m.epochs[k.producer]}
	if log := m.logs[k]; len(log) > 0 {
		st.LastSeq = log[len(log)-1].Seq
	}
	return st
}

// Fence implements Store.
func (m *MemoryStore) Fence(producer string, epoch uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if stored := m.epochs[producer]; epoch <= stored {
		return fmt.Errorf("%w: producer %q: epoch %d, stored %d", ErrFenced, producer, epoch, stored)
	}
	m.epochs[producer] = epoch
	return nil
}

// Append implements Store. It copies the records, their metadata included,
// into one allocation for the bytes and one for the headers.
func (m *MemoryStore) Append(topic, producer string, epoch uint64, recs []Record) error {
	n, nh := 0, 0
	for i := range recs {
		n += len(recs[i].Payload) + len(recs[i].Key)
		nh += len(recs[i].Headers)
		for _, h := range recs[i].Headers {
			n += len(h.Value)
		}
	}
	arena := make([]byte, 0, n)
	var headers []wire.Header
	if nh > 0 {
		headers = make([]wire.Header, 0, nh)
	}
	keep := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		start := len(arena)
		arena = append(arena, b...)
		return arena[start:len(arena):len(arena)]
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.appendErr != nil {
		return m.appendErr
	}
	key := stream{topic, producer}
	if stored := m.epochs[producer]; epoch < stored {
		return fmt.Errorf("%w: producer %q (topic %q): epoch %d, stored %d", ErrFenced, producer, topic, epoch, stored)
	}
	if len(recs) == 0 {
		return nil // no entry: Producers lists only producers with records
	}
	log := m.logs[key]
	for _, r := range recs {
		c := Record{Seq: r.Seq, Payload: keep(r.Payload), Key: keep(r.Key), EventTime: r.EventTime}
		if r.Payload != nil && c.Payload == nil {
			c.Payload = []byte{}
		}
		if len(r.Headers) > 0 {
			start := len(headers)
			for _, h := range r.Headers {
				headers = append(headers, wire.Header{Key: h.Key, Value: keep(h.Value)})
			}
			c.Headers = headers[start:len(headers):len(headers)]
		}
		log = append(log, c)
	}
	m.logs[key] = log
	return nil
}

// FailAppends makes every later Append return err (nil restores normal
// operation). For tests of the broker's store-failure path.
func (m *MemoryStore) FailAppends(err error) {
	m.mu.Lock()
	m.appendErr = err
	m.mu.Unlock()
}

// Records returns a copy of the records stored for producer on
// wire.DefaultTopic, in order: TopicRecords(wire.DefaultTopic, producer).
func (m *MemoryStore) Records(producer string) []Record {
	return m.TopicRecords(wire.DefaultTopic, producer)
}

// TopicRecords returns a copy of the records stored for producer on topic,
// in order. Their slices are shared with the store and must not be
// modified.
func (m *MemoryStore) TopicRecords(topic, producer string) []Record {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Clone(m.logs[stream{topic, producer}])
}

// Len returns the number of records stored for producer on
// wire.DefaultTopic.
func (m *MemoryStore) Len(producer string) int { return m.TopicLen(wire.DefaultTopic, producer) }

// TopicLen returns the number of records stored for producer on topic.
func (m *MemoryStore) TopicLen(topic, producer string) int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.logs[stream{topic, producer}])
}

// Producers returns the names of the producers with records stored on
// wire.DefaultTopic, sorted.
func (m *MemoryStore) Producers() []string {
	var names []string
	for _, s := range m.Streams() {
		if s[0] == wire.DefaultTopic {
			names = append(names, s[1])
		}
	}
	return names
}

// Streams returns every (topic, producer) pair with stored records, sorted
// by topic, then producer.
func (m *MemoryStore) Streams() [][2]string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([][2]string, 0, len(m.logs))
	for s := range m.logs {
		out = append(out, [2]string{s.topic, s.producer})
	}
	slices.SortFunc(out, func(a, b [2]string) int {
		return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
	})
	return out
}

// CountingStore is a Store that keeps only the last sequence ID and a record
// count per (topic, producer), and the epoch per producer name: what a
// benchmark needs without the memory of a MemoryStore. It is safe for
// concurrent use.
type CountingStore struct {
	mu     sync.Mutex
	last   map[stream]uint64
	n      map[stream]uint64
	epochs map[string]uint64
}

// NewCountingStore returns an empty CountingStore.
func NewCountingStore() *CountingStore {
	return &CountingStore{last: make(map[stream]uint64), n: make(map[stream]uint64), epochs: make(map[string]uint64)}
}

// State implements Store.
func (c *CountingStore) State(topic, producer string) (NameState, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return NameState{LastSeq: c.last[stream{topic, producer}], Epoch: c.epochs[producer]}, nil
}

// Fence implements Store.
func (c *CountingStore) Fence(producer string, epoch uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if stored := c.epochs[producer]; epoch <= stored {
		return fmt.Errorf("%w: producer %q: epoch %d, stored %d", ErrFenced, producer, epoch, stored)
	}
	c.epochs[producer] = epoch
	return nil
}

// Append implements Store.
func (c *CountingStore) Append(topic, producer string, epoch uint64, recs []Record) error {
	k := stream{topic, producer}
	c.mu.Lock()
	defer c.mu.Unlock()
	if stored := c.epochs[producer]; epoch < stored {
		return fmt.Errorf("%w: producer %q (topic %q): epoch %d, stored %d", ErrFenced, producer, topic, epoch, stored)
	}
	if len(recs) == 0 {
		return nil
	}
	c.last[k] = recs[len(recs)-1].Seq
	c.n[k] += uint64(len(recs))
	return nil
}

// Count returns the number of records appended for producer on
// wire.DefaultTopic.
func (c *CountingStore) Count(producer string) uint64 {
	return c.TopicCount(wire.DefaultTopic, producer)
}

// TopicCount returns the number of records appended for producer on topic.
func (c *CountingStore) TopicCount(topic, producer string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[stream{topic, producer}]
}
