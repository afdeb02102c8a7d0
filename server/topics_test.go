package server_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/wire"
)

// TestManyTopicsOneConnection: over TCP (plain and TLS), one connection
// declares many topics and interleaves their batches; the receipts, of
// one or several topics each, acknowledge every topic up to its last
// sequence ID, the store holds each topic's records once and in order,
// and a new connection of the same producer learns each topic's last
// stored ID from its TOPIC_OK.
func TestManyTopicsOneConnection(t *testing.T) {
	const topics, batches, per = 40, 5, 3
	topicName := func(id int) string { return fmt.Sprintf("t.%02d", id) }
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			e := newEnv(t, m.tls)
			name := uniqueName("many")
			r := dialRaw(t, e)
			r.hello(name) // declares id 0, the default topic: left unused
			for id := 1; id <= topics; id++ {
				require.Zero(t, r.declare(uint32(id), topicName(id)))
			}
			for b := range batches {
				for id := 1; id <= topics; id++ {
					var bb wire.BatchBuilder
					bb.Reset(nil, uint32(id), uint64(b*per+1))
					for k := range per {
						bb.Add(fmt.Appendf(nil, "%s-%d", topicName(id), b*per+k+1))
					}
					r.write(bb.Finish())
				}
			}
			acked := map[uint32]uint64{}
			for len(acked) < topics || !allAt(acked, batches*per) {
				for _, rc := range testkit.Receipts(t, r.read()) {
					require.NotZero(t, rc.Topic, "no receipt for the unused topic")
					require.GreaterOrEqual(t, rc.Seq, acked[rc.Topic], "receipts are cumulative per topic")
					acked[rc.Topic] = rc.Seq
				}
			}
			for id := 1; id <= topics; id++ {
				recs := e.store.TopicRecords(topicName(id), name)
				require.Len(t, recs, batches*per, "topic %s", topicName(id))
				for i, rec := range recs {
					assert.Equal(t, uint64(i+1), rec.Seq)
					assert.Equal(t, fmt.Sprintf("%s-%d", topicName(id), i+1), string(rec.Payload))
				}
			}
			assert.Zero(t, e.store.Len(name), "nothing on the default topic")

			// A new connection of the name: each topic's last stored ID,
			// whatever id it gets on this connection.
			r2 := dialRaw(t, e)
			r2.hello(name)
			for id := 1; id <= topics; id++ {
				assert.Equal(t, uint64(batches*per), r2.declare(uint32(1000+id), topicName(id)))
			}
		})
	}
}

// allAt reports whether every acknowledged topic is at seq.
func allAt(acked map[uint32]uint64, seq uint64) bool {
	for _, s := range acked {
		if s != seq {
			return false
		}
	}
	return true
}
