package core_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/core"
)

func TestSendAndReceive(t *testing.T) {
	e := newEnv(t)
	const n = 1000
	rec := newRecorder(n)
	for i := range n {
		require.NoError(t, e.p.SendAsync(context.Background(), &core.Message{Payload: payload(i)}, rec.cb(i)))
	}
	rec.wait(t)
	for i := range n {
		o := rec.get(i)
		require.NoError(t, o.err)
		require.Equal(t, core.MessageID(i+1), o.id)
	}
	recs := e.store.Records("test-producer")
	require.Len(t, recs, n)
	for i, r := range recs {
		assert.Equal(t, uint64(i+1), r.Seq)
		assert.Equal(t, payload(i), r.Payload)
	}
	id, err := e.p.Send(context.Background(), &core.Message{Payload: []byte("x")})
	require.NoError(t, err)
	assert.Equal(t, core.MessageID(n+1), id)
}
