package file_test

import (
	"fmt"

	"github.com/inflightmq/inflight/broker"

	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/wire"
)

// dflt is the topic of the tests that do not care about topics.
const dflt = wire.DefaultTopic

var (
	seqRecs  = testkit.Records
	recs     = testkit.Payloads
	seqRange = testkit.SeqRange
)

// payload is the record for seq in generation gen; the generation tells a
// first write from a resend of the same seq.
func payload(gen int, seq uint64) []byte { return fmt.Appendf(nil, "g%d-s%d", gen, seq) }

// lastSeq returns State's LastSeq.
func lastSeq(s broker.Store, topic, producer string) (uint64, error) {
	st, err := s.State(topic, producer)
	return st.LastSeq, err
}
