package server_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/inflightmq/inflight/internal/leakcheck"
)

// leakcheck's options: TestBothDialers starts gnet (transport/tcp), whose
// global pool outlives it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leakcheck.Options()...) }
