package peers

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/inflightmq/inflight/internal/leakcheck"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leakcheck.Options()...) }
