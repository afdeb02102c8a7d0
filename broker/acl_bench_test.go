package broker_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/inflightmq/inflight/broker"
)

// BenchmarkACLAuthenticate: the cost a HELLO with a token pays, with 1 and
// 1000 tokens in the list (each compared in constant time).
func BenchmarkACLAuthenticate(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("tokens=%d", n), func(b *testing.B) {
			var text strings.Builder
			for i := range n {
				fmt.Fprintf(&text, "id%d %s orders till-%d\n", i, broker.TokenHash(fmt.Sprint("token-", i)), i)
			}
			acl, err := broker.ParseACL(strings.NewReader(text.String()))
			if err != nil {
				b.Fatal(err)
			}
			creds := broker.Credentials{Token: "token-0"}
			b.ReportAllocs()
			for b.Loop() {
				id, err := acl.Authenticate(creds)
				if err != nil || acl.Authorize(id, "orders", "till-0") != nil {
					b.Fatal(id, err)
				}
			}
		})
	}
}
