package natsjs_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/inflightmq/inflight/internal/leakcheck"
)

// TestMain checks that no test leaves a goroutine behind. The only ignores
// are gnet's pool workers (leakcheck.Options: TestNativeGatewayKill9 dials over
// TCP, and gnet keeps its pool for the life of the process) and
// nats-server's process-wide access-time goroutine (leakcheck.NATSOptions);
// a Cluster's Shutdown and a connection's Close stop every other goroutine
// of nats-server and nats.go.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leakcheck.NATSOptions()...)
}
