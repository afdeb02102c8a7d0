package testkit

import (
	"context"
	"testing"
	"time"

	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/transport"
)

// NewProducer returns a producer on d named name, with a fast reconnect
// backoff and its errors in the returned log, after opts. At the end of the
// test it closes the producer (see CloseProducer) and then d.
func NewProducer(t testing.TB, d transport.Dialer, closeDialer func() error, name string, opts ...core.Option) (*core.Producer, *ErrLog) {
	t.Helper()
	log := &ErrLog{}
	opts = append([]core.Option{
		core.Name(name),
		core.ReconnectBackoff(5*time.Millisecond, 50*time.Millisecond),
		core.ErrorHandler(log.Add),
	}, opts...)
	p, err := core.New(d, opts...)
	if err != nil {
		t.Fatalf("core.New: %v", err)
	}
	t.Cleanup(func() {
		CloseProducer(t, p, 200*time.Millisecond)
		_ = closeDialer()
	})
	return p, log
}

// CloseProducer closes p with a context of quick, failing what is still
// pending, then waits (up to 10s, else the test fails) for the callbacks
// that Close left owed.
func CloseProducer(t testing.TB, p *core.Producer, quick time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), quick)
	defer cancel()
	_ = p.Close(ctx)
	end, endCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer endCancel()
	if err := p.Close(end); err != nil {
		t.Errorf("callbacks still owed 10s after Close: %v", err)
	}
}
