package stdnet_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/inflightmq/inflight/internal/leakcheck"
)

// leakcheck's options: the interoperability test starts gnet, whose global
// pool outlives it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leakcheck.Options()...) }
