package natsjs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inflightmq/inflight/store/natsjs"
	"github.com/inflightmq/inflight/store/natsjs/natsjstest"
)

// TestEnsureStreamReportsOverlap: a second stream on the subjects of an
// existing one is an error for good: EnsureStream and Open return it at
// once (not when their 30 s context ends) with the server's description
// and code, and say what to do about it.
func TestEnsureStreamReportsOverlap(t *testing.T) {
	c := startCluster(t, 1, natsjstest.Options{})
	ensureStream(t, c, natsjs.StreamConfig{})
	js, err := jetstream.New(connect(t, c))
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error, took time.Duration) {
		t.Helper()
		var api *jetstream.APIError
		switch {
		case err == nil:
			t.Fatalf("%s of an overlapping stream succeeded", what)
		case !errors.As(err, &api) || api.ErrorCode != 10065:
			t.Errorf("%s: %v, want the server's error 10065", what, err)
		case !strings.Contains(err.Error(), "subjects overlap with an existing stream") || !strings.Contains(err.Error(), "prefix"):
			t.Errorf("%s: %q does not give the server's description and a hint", what, err)
		}
		if took > 2*time.Second {
			t.Errorf("%s took %v: an error for good is not retried", what, took)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err = natsjs.EnsureStream(ctx, js, natsjs.StreamConfig{Name: "OTHER"})
	check("EnsureStream", err, time.Since(start))

	start = time.Now()
	_, err = natsjs.Open(ctx, "nats://"+strings.TrimPrefix(c.URLs(), "nats://")+"/OTHER")
	check("Open", err, time.Since(start))

	// A stream that is missing while create=false is as final.
	start = time.Now()
	_, err = natsjs.Open(ctx, "nats://"+strings.TrimPrefix(c.URLs(), "nats://")+"/MISSING?create=false")
	if !errors.Is(err, jetstream.ErrStreamNotFound) || time.Since(start) > 2*time.Second {
		t.Errorf("Open of a missing stream with create=false: %v after %v", err, time.Since(start))
	}
}
