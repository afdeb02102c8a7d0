package loopback

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/leakcheck"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leakcheck.Options()...) }

// TestOpen sends through every transport, cuts the connection, sends again:
// the broker stores both, and Close leaves nothing behind.
func TestOpen(t *testing.T) {
	for _, name := range Transports {
		t.Run(name, func(t *testing.T) {
			env, err := Open(name)
			if err != nil {
				t.Fatal(err)
			}
			defer env.Close()
			p, err := core.New(env.Dialer, core.Name("loopback"))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close(context.Background())
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := p.Send(ctx, &core.Message{Payload: []byte("one")}); err != nil {
				t.Fatal(err)
			}
			env.Cut()
			if _, err := p.Send(ctx, &core.Message{Payload: []byte("two")}); err != nil {
				t.Fatal(err)
			}
			if n := env.Store.Count("loopback"); n != 2 {
				t.Errorf("store counted %d records, want 2", n)
			}
		})
	}
}

func TestOpenUnknown(t *testing.T) {
	if _, err := Open("carrier-pigeon"); err == nil {
		t.Fatal("an unknown transport opened")
	}
}
