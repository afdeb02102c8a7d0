package tcp_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/transport/tcp"
)

const waitTimeout = 10 * time.Second

var waitUntil = testkit.WaitUntil

// newProducer dials addr and returns a producer closed at the end of the
// test.
func newProducer(t *testing.T, addr string, opts ...core.Option) (*core.Producer, *testkit.ErrLog) {
	t.Helper()
	d, err := tcp.NewDialer(addr)
	require.NoError(t, err)
	return testkit.NewProducer(t, d, d.Close, uniqueName(t.Name()), opts...)
}

var nameSeq atomic.Int64

// uniqueName keeps names distinct across -count runs against the shared
// server's store.
func uniqueName(base string) string { return fmt.Sprintf("%s-%d", base, nameSeq.Add(1)) }
