package bench

import (
	"fmt"
	"math/rand/v2"

	"github.com/inflightmq/inflight/core"
)

// messages returns n distinct messages of exactly size bytes whose content
// compresses like typical application records: JSON-like text with random
// numbers and words, padded with more of the same.
func messages(n, size int) []*core.Message {
	r := rand.New(rand.NewPCG(uint64(n), uint64(size)))
	words := []string{"order", "created", "shipped", "customer", "amount", "currency", "EUR", "USD", "status", "ok", "retry", "region", "eu-west", "us-east"}
	msgs := make([]*core.Message, n)
	for i := range msgs {
		b := make([]byte, 0, size+64)
		for len(b) < size {
			b = fmt.Appendf(b, `{"id":%d,"%s":"%s","%s":%d.%02d,"ts":%d}`,
				r.Uint64()%1e9, words[r.IntN(len(words))], words[r.IntN(len(words))],
				words[r.IntN(len(words))], r.IntN(10000), r.IntN(100), 1_700_000_000_000+r.Int64N(1e9))
		}
		msgs[i] = &core.Message{Payload: b[:size]}
	}
	return msgs
}
