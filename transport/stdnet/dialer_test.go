package stdnet_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/transport/stdnet"
)

const waitTimeout = 10 * time.Second

// newProducer dials addr with a stdnet.Dialer and returns a producer
// closed, with its dialer, at the end of the test.
func newProducer(t *testing.T, addr string, dopts []stdnet.DialOption, opts ...core.Option) (*core.Producer, *testkit.ErrLog) {
	t.Helper()
	d, err := stdnet.NewDialer(addr, dopts...)
	require.NoError(t, err)
	return testkit.NewProducer(t, d, d.Close, uniqueName(t.Name()), opts...)
}

var nameSeq atomic.Int64

func uniqueName(base string) string { return fmt.Sprintf("%s-%d", base, nameSeq.Add(1)) }

func TestDialerOptions(t *testing.T) {
	_, err := stdnet.NewDialer("no-port")
	assert.ErrorIs(t, err, stdnet.ErrInvalidOption)
	for _, o := range []stdnet.DialOption{stdnet.ConnectTimeout(0), stdnet.MaxInboundFrame(10), stdnet.WriteQueue(0), stdnet.ClientTLS(nil), nil} {
		_, err = stdnet.NewDialer("127.0.0.1:1", o)
		assert.ErrorIs(t, err, stdnet.ErrInvalidOption)
	}
}

// TestStalledReaderBoundsMemory: a broker that stops reading stops the
// producer's pump, not the client's memory (see
// testkit.StalledReaderBoundsMemory).
func TestStalledReaderBoundsMemory(t *testing.T) {
	testkit.StalledReaderBoundsMemory(t, func(addr string, opts ...core.Option) *core.Producer {
		p, _ := newProducer(t, addr, nil, opts...)
		return p
	})
}

func TestDialerClosed(t *testing.T) {
	d, err := stdnet.NewDialer("127.0.0.1:1")
	require.NoError(t, err)
	require.NoError(t, d.Close())
	require.NoError(t, d.Close())
	_, err = d.Dial(context.Background(), nil)
	assert.ErrorIs(t, err, stdnet.ErrDialerClosed)
}

// discard reads c until it fails.
func discard(c net.Conn) { _, _ = io.Copy(io.Discard, c) }
