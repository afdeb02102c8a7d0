package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/transport/mem"
	"github.com/inflightmq/inflight/wire"
)

// appendFails is a Store whose Append always fails: the broker accepts
// every HELLO and ends the session at its first BATCH.
type appendFails struct{ *broker.MemoryStore }

func (appendFails) Append(string, string, uint64, []broker.Record) error {
	return errors.New("disk on fire")
}

// TestBackoffAfterFailedSession: sessions that die right after their
// handshake are redialed with the backoff, not in a loop: the producer
// dials at most once per the backoff's min, however fast its sessions fail.
func TestBackoffAfterFailedSession(t *testing.T) {
	b, err := broker.New(appendFails{broker.NewMemoryStore()})
	require.NoError(t, err)
	d := mem.NewDialer(b)
	const backoffMin = 5 * time.Millisecond
	start := time.Now()
	p, errs := testkit.NewProducer(t, d, d.Close, "backoff-test",
		core.ReconnectBackoff(backoffMin, 40*time.Millisecond), core.SendTimeout(time.Minute))
	require.NoError(t, p.SendAsync(context.Background(), &core.Message{Payload: []byte("never stored")},
		func(core.MessageID, *core.Message, error) {}))

	const sessions = 10
	waitUntil(t, "sessions to fail", func() bool { return d.Dials() >= sessions })
	dials, took := d.Dials(), time.Since(start) // dials first: took is then an upper bound
	// Each dial comes at least backoffMin after the one before it.
	assert.LessOrEqual(t, dials, int(took/backoffMin)+1, "%d dials in %v", dials, took)
	assert.NotNil(t, errs.Find(func(err error) bool {
		var re *wire.RemoteError
		return errors.As(err, &re) && re.Code == wire.CodeStore
	}), "the broker's ERROR that ended the sessions is reported")
	t.Logf("%d dials in %v", dials, took)
}
