package core_test

import (
	"context"
	"errors"
	"sync/atomic"
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
// every HELLO and TOPIC and ends the topic at its first BATCH.
type appendFails struct {
	*broker.MemoryStore
	calls atomic.Int64
}

func (a *appendFails) Append(string, string, uint64, []broker.Record) error {
	a.calls.Add(1)
	return errors.New("disk on fire")
}

// TestBackoffAfterFailedSession: a topic whose store fails right after its
// declaration is declared again with the backoff, not in a loop: at most
// one Append per the backoff's min, however fast the store fails, and the
// connection stays up for the other topics.
func TestBackoffAfterFailedSession(t *testing.T) {
	store := &appendFails{MemoryStore: broker.NewMemoryStore()}
	b, err := broker.New(store)
	require.NoError(t, err)
	d := mem.NewDialer(b)
	const backoffMin = 5 * time.Millisecond
	start := time.Now()
	p, errs := testkit.NewProducer(t, d, d.Close, "backoff-test",
		core.ReconnectBackoff(backoffMin, 40*time.Millisecond), core.SendTimeout(time.Minute))
	require.NoError(t, p.SendAsync(context.Background(), &core.Message{Payload: []byte("never stored")},
		func(core.MessageID, *core.Message, error) {}))

	const tries = 10
	waitUntil(t, "appends to fail", func() bool { return store.calls.Load() >= tries })
	calls, took := store.calls.Load(), time.Since(start) // calls first: took is then an upper bound
	assert.LessOrEqual(t, calls, int64(took/backoffMin)+1, "%d appends in %v", calls, took)
	assert.Equal(t, 1, d.Dials(), "the connection stayed up")
	assert.NotNil(t, errs.Find(func(err error) bool {
		var re *wire.RemoteError
		return errors.As(err, &re) && re.Code == wire.CodeStore
	}), "the broker's TOPIC_ERROR that ended the topic is reported")
	t.Logf("%d appends in %v", calls, took)
}
