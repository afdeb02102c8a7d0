package broker_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/internal/testkit"
)

var recs = testkit.Payloads

func TestMemoryStore(t *testing.T) {
	m := broker.NewMemoryStore()
	var _ broker.Store = m

	last, err := lastSeqOf(m, dflt, "a")
	require.NoError(t, err)
	assert.Zero(t, last)
	assert.Zero(t, m.Len("a"))
	assert.Empty(t, m.Records("a"))
	assert.Empty(t, m.Producers())

	in := recs("x", "", "zz")
	require.NoError(t, m.Append(dflt, "b", 0, seqRecs(1, in)))
	require.NoError(t, m.Append(dflt, "b", 0, seqRecs(10, recs("after a gap"))))
	require.NoError(t, m.Append(dflt, "a", 0, seqRecs(7, recs("a7"))))
	require.NoError(t, m.Append(dflt, "c", 0, seqRecs(1, recs("c1"))))

	// Append copied the records: the caller may reuse its buffers.
	in[0][0] = 'X'
	in[2][1] = 'Z'

	assert.Equal(t, []string{"a", "b", "c"}, m.Producers(), "sorted")
	assert.Equal(t, 4, m.Len("b"))
	assert.Zero(t, m.Len("nobody"))
	last, err = lastSeqOf(m, dflt, "b")
	require.NoError(t, err)
	assert.Equal(t, uint64(10), last)
	last, err = lastSeqOf(m, dflt, "a")
	require.NoError(t, err)
	assert.Equal(t, uint64(7), last)

	got := m.Records("b")
	require.Equal(t, []broker.Record{
		{Seq: 1, Payload: []byte("x")},
		{Seq: 2, Payload: []byte{}},
		{Seq: 3, Payload: []byte("zz")},
		{Seq: 10, Payload: []byte("after a gap")},
	}, got)

	// Records returns a copy of the slice: changing it does not change the store.
	got[0] = broker.Record{Seq: 99}
	got = append(got[:1], broker.Record{Seq: 100})
	_ = got
	assert.Equal(t, uint64(1), m.Records("b")[0].Seq)
	assert.Equal(t, uint64(2), m.Records("b")[1].Seq)
	assert.Equal(t, 4, m.Len("b"))

	// A payload cannot be grown into its neighbour.
	p := m.Records("b")[0].Payload
	assert.Equal(t, len(p), cap(p))
}

func TestMemoryStoreEmptyAppend(t *testing.T) {
	m := broker.NewMemoryStore()
	require.NoError(t, m.Append(dflt, "a", 0, seqRecs(1, nil)))
	require.NoError(t, m.Append(dflt, "a", 0, seqRecs(1, [][]byte{})))
	assert.Zero(t, m.Len("a"))
	assert.Empty(t, m.Producers(), "Producers lists only producers with stored records")
	last, err := lastSeqOf(m, dflt, "a")
	require.NoError(t, err)
	assert.Zero(t, last)
}

func TestMemoryStoreFailAppends(t *testing.T) {
	m := broker.NewMemoryStore()
	require.NoError(t, m.Append(dflt, "a", 0, seqRecs(1, recs("1"))))
	boom := errors.New("boom")
	m.FailAppends(boom)
	require.ErrorIs(t, m.Append(dflt, "a", 0, seqRecs(2, recs("2"))), boom)
	require.ErrorIs(t, m.Append(dflt, "b", 0, seqRecs(1, recs("1"))), boom)
	assert.Equal(t, 1, m.Len("a"), "a failed Append stores nothing")
	assert.Equal(t, []string{"a"}, m.Producers())
	m.FailAppends(nil)
	require.NoError(t, m.Append(dflt, "a", 0, seqRecs(2, recs("2"))))
	assert.Equal(t, 2, m.Len("a"))
}

func TestMemoryStoreConcurrent(t *testing.T) {
	m := broker.NewMemoryStore()
	var wg sync.WaitGroup
	for _, name := range []string{"a", "b", "c", "d"} {
		wg.Go(func() {
			for i := range 100 {
				assert.NoError(t, m.Append(dflt, name, 0, seqRecs(uint64(i)+1, recs(name))))
				_ = m.Records(name)
				_ = m.Producers()
			}
		})
	}
	wg.Wait()
	for _, name := range []string{"a", "b", "c", "d"} {
		assert.Equal(t, 100, m.Len(name))
		last, err := lastSeqOf(m, dflt, name)
		require.NoError(t, err)
		assert.Equal(t, uint64(100), last)
	}
}

func TestCountingStore(t *testing.T) {
	c := broker.NewCountingStore()
	var _ broker.Store = c

	last, err := lastSeqOf(c, dflt, "a")
	require.NoError(t, err)
	assert.Zero(t, last)
	assert.Zero(t, c.Count("a"))

	require.NoError(t, c.Append(dflt, "a", 0, seqRecs(1, recs("1", "2", "3"))))
	require.NoError(t, c.Append(dflt, "a", 0, seqRecs(10, recs("10", "11"))))
	require.NoError(t, c.Append(dflt, "a", 0, seqRecs(12, nil))) // nothing: last unchanged
	require.NoError(t, c.Append(dflt, "b", 0, seqRecs(5, recs("5"))))

	for _, tt := range []struct {
		name  string
		last  uint64
		count uint64
	}{{"a", 11, 5}, {"b", 5, 1}, {"c", 0, 0}} {
		last, err := lastSeqOf(c, dflt, tt.name)
		require.NoError(t, err)
		assert.Equal(t, tt.last, last, tt.name)
		assert.Equal(t, tt.count, c.Count(tt.name), tt.name)
	}
}

// TestCountingStoreBroker runs a broker on a CountingStore: dedup works
// from the store's last seq across sessions.
func TestCountingStoreBroker(t *testing.T) {
	cs := broker.NewCountingStore()
	b, err := broker.New(cs)
	require.NoError(t, err)
	c := newConn(t, b)
	c.hello(t, "p")
	c.send(t, 0, 1, 10)
	c.Close()
	c = newConn(t, b)
	defer c.Close()
	assert.Equal(t, uint64(10), c.hello(t, "p").LastSeq)
	assert.Equal(t, uint64(12), c.send(t, 0, 5, 8))
	assert.Equal(t, uint64(12), cs.Count("p"))
}

// lastSeqOf returns State's LastSeq.
func lastSeqOf(s broker.Store, topic, producer string) (uint64, error) {
	st, err := s.State(topic, producer)
	return st.LastSeq, err
}
