package main

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
)

// TestDemoChecksMetadata: the demo's store counts a record whose topic, key
// or header differs from what the sender made for its index.
func TestDemoChecksMetadata(t *testing.T) {
	rec := func(idx uint64) broker.Record {
		m := core.Message{Payload: binary.BigEndian.AppendUint64(nil, idx), Key: make([]byte, 8),
			Headers: []core.Header{{Key: demoHeader, Value: make([]byte, 4)}}}
		demoMeta(idx, m.Key, m.Headers[0].Value)
		return broker.Record{Seq: idx + 1, Payload: m.Payload, Key: m.Key, Headers: m.Headers}
	}
	s := newCheckStore()
	good := rec(0)
	badKey := rec(1)
	badKey.Key = rec(2).Key
	badHeader := rec(2)
	badHeader.Headers = []core.Header{{Key: "other", Value: badHeader.Headers[0].Value}}
	noHeader := rec(3)
	noHeader.Headers = nil
	require.NoError(t, s.Append(demoTopics[0], "demo", 0, []broker.Record{good, badKey, badHeader, noHeader}))
	require.NoError(t, s.Append("elsewhere", "demo", 0, []broker.Record{rec(9)}))
	_, _, _, bad := s.snapshot()
	assert.Equal(t, uint64(4), bad)
}

// TestDemoChecksPerTopic: the demo's store checks sequence IDs and order
// per topic: the same sequence ID on two topics is no duplicate, an index
// below the previous one of another topic is no disorder, but both within
// a topic are; a record on a topic other than its index's is counted.
func TestDemoChecksPerTopic(t *testing.T) {
	rec := func(seq, idx uint64) broker.Record {
		m := core.Message{Payload: binary.BigEndian.AppendUint64(nil, idx), Key: make([]byte, 8),
			Headers: []core.Header{{Key: demoHeader, Value: make([]byte, 4)}}}
		demoMeta(idx, m.Key, m.Headers[0].Value)
		return broker.Record{Seq: seq, Payload: m.Payload, Key: m.Key, Headers: m.Headers}
	}
	s := newCheckStore()
	require.NoError(t, s.Append(demoTopics[0], "demo", 0, []broker.Record{rec(1, 0), rec(2, 3)}))
	require.NoError(t, s.Append(demoTopics[1], "demo", 0, []broker.Record{rec(1, 1), rec(2, 4)}))
	records, dups, disorder, bad := s.snapshot()
	assert.Equal(t, [4]uint64{4, 0, 0, 0}, [4]uint64{records, dups, disorder, bad})
	var successes [len(demoTopics)]bitset
	successes[0].set(1)
	successes[1].set(2)
	successes[2].set(1) // never stored on demoTopics[2]
	assert.Equal(t, uint64(1), s.missing(successes[:]))

	require.NoError(t, s.Append(demoTopics[0], "demo", 0, []broker.Record{rec(2, 0)})) // seq 2 again, index 0 again
	require.NoError(t, s.Append(demoTopics[2], "demo", 0, []broker.Record{rec(1, 7)})) // index 7 is demoTopics[1]'s
	records, dups, disorder, bad = s.snapshot()
	assert.Equal(t, [4]uint64{6, 1, 1, 1}, [4]uint64{records, dups, disorder, bad})
}

func TestProduceMetaFlags(t *testing.T) {
	var h headerFlags
	require.NoError(t, h.Set("trace=abc"))
	require.NoError(t, h.Set("trace="))
	require.Error(t, h.Set("novalue"))
	assert.Equal(t, "trace=abc,trace=", h.String())
	var k keyFlag
	require.NoError(t, k.Set("random"))
	var m1, m2 core.Message
	k.prepare(&m1, h)
	k.prepare(&m2, h)
	k.next(&m1)
	k.next(&m2)
	assert.Len(t, m1.Key, 16)
	assert.NotEqual(t, m1.Key, m2.Key)
	assert.Len(t, m1.Headers, 2)
	require.NoError(t, k.Set("user-1"))
	var m3 core.Message
	k.prepare(&m3, nil)
	k.next(&m3)
	assert.Equal(t, "user-1", string(m3.Key))
	assert.Nil(t, m3.Headers)
}
