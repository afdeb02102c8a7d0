package testkit

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/inflightmq/inflight/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestErrLog(t *testing.T) {
	target := errors.New("target")
	var l ErrLog
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { l.Add(fmt.Errorf("wrapped %d: %w", i, target)) })
	}
	wg.Wait()
	l.Add(errors.New("other"))
	assert.Len(t, l.Snapshot(), 9)
	assert.True(t, l.Has(target))
	assert.Equal(t, 8, l.Count(target))
	assert.False(t, l.Has(errors.New("absent")))
	assert.EqualError(t, l.Find(func(err error) bool { return err.Error() == "other" }), "other")
}

func TestDescribeFrame(t *testing.T) {
	assert.Equal(t, "no frame", DescribeFrame(nil))
	assert.Contains(t, DescribeFrame([]byte{1, 2}), "invalid frame")
	e := wire.AppendError(nil, wire.Error{Code: wire.CodeProtocol, Text: "bad"})
	assert.Contains(t, DescribeFrame(e), `"bad"`)
	assert.Equal(t, wire.TypePing.String(), DescribeFrame(wire.AppendPing(nil, wire.Ping{Nonce: 1})))
}

func TestWaitChan(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	assert.Equal(t, 7, WaitChan(t, ch, "a value"))
	done := make(chan struct{})
	close(done)
	WaitChan(t, done, "a closed channel")
}
