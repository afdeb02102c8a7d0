package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/transport/stdnet"
)

// newProducer dials addr with a stdnet.Dialer and returns a producer
// closed, with its dialer, at the end of the test.
func newProducer(t *testing.T, addr string, dopts []stdnet.DialOption, opts ...core.Option) (*core.Producer, *testkit.ErrLog) {
	t.Helper()
	d, err := stdnet.NewDialer(addr, dopts...)
	require.NoError(t, err)
	return testkit.NewProducer(t, d, d.Close, uniqueName(t.Name()), opts...)
}
