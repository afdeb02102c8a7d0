package core_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/wire"
)

// refusingDialer is a broker that refuses every connection on sight: it
// sends an ERROR and hangs up before the producer wrote its HELLO (as
// server.Server does beyond MaxConns).
type refusingDialer struct{ dials atomic.Int32 }

func (d *refusingDialer) Dial(_ context.Context, h transport.Handler) (transport.Conn, error) {
	d.dials.Add(1)
	h.OnFrame(wire.AppendError(nil, wire.Error{Code: wire.CodeProtocol, Text: "too many connections"}))
	h.OnClose(transport.ErrClosed)
	return closedConn{}, nil
}

type closedConn struct{}

func (closedConn) WriteFrame(*transport.Buffer) error { return transport.ErrClosed }
func (closedConn) Close() error                       { return nil }

// TestRefusedOnSightNamesTheCause: a connection refused before the HELLO
// could be written reports the broker's ERROR, not the failed write.
func TestRefusedOnSightNamesTheCause(t *testing.T) {
	d := &refusingDialer{}
	log := &testkit.ErrLog{}
	p, err := core.New(d, core.Name("refused"), core.ErrorHandler(log.Add),
		core.ReconnectBackoff(time.Millisecond, 5*time.Millisecond))
	require.NoError(t, err)
	defer testkit.CloseProducer(t, p, 10*time.Millisecond)
	waitUntil(t, "a refusal reported", func() bool { return log.Has(core.ErrHandshake) })
	refusal := log.Find(func(err error) bool { return errors.Is(err, core.ErrHandshake) })
	var remote *wire.RemoteError
	require.ErrorAs(t, refusal, &remote, "%v", refusal)
	require.Contains(t, refusal.Error(), "too many connections")
}
