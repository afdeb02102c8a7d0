package natsjs_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/inflightmq/inflight/internal/leakcheck"
)

// TestMain checks that no test leaves a goroutine behind. The only ignores
// are gnet's pool workers (leakcheck.Options: TestNativeGatewayKill9 dials over
// TCP, and gnet keeps its pool for the life of the process); nats-server
// and nats.go need none, since a Cluster's Shutdown and a connection's
// Close stop all of theirs.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leakcheck.Options()...)
}
