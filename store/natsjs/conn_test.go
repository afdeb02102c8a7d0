package natsjs_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/inflightmq/inflight/store/natsjs"
	"github.com/inflightmq/inflight/store/natsjs/natsjstest"
)

// TestNoBufferingBehindTheRing: an Append while the client is disconnected
// fails at once instead of being buffered and written after the
// reconnect, and one the stream cannot commit (no quorum) fails by the
// store's timeout; either way the next Append, once the servers are back,
// stores the records exactly once.
func TestNoBufferingBehindTheRing(t *testing.T) {
	t.Run("disconnected", func(t *testing.T) {
		c := startCluster(t, 1, natsjstest.Options{})
		ensureStream(t, c, natsjs.StreamConfig{})
		nc := connect(t, c)
		s, err := natsjs.New(t.Context(), nc, natsjs.Config{Stream: streamName, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Append("t", "p", 0, plainRecords(1, 2)); err != nil {
			t.Fatal(err)
		}
		c.Stop(0)
		waitFor(t, 10*time.Second, "the client to notice", func() bool { return nc.Status() != nats.CONNECTED })
		start := time.Now()
		err = s.Append("t", "p", 0, plainRecords(3, 4))
		if !errors.Is(err, natsjs.ErrPublish) {
			t.Fatalf("Append while disconnected: %v, want ErrPublish", err)
		}
		if el := time.Since(start); el > time.Second {
			t.Errorf("Append while disconnected took %v; it must fail at once, not wait out the 5s timeout", el)
		}
		if err := c.Restart(0); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, "the append to go through", func() bool { return s.Append("t", "p", 0, plainRecords(3, 4)) == nil })
		checkSeqs(t, records(readSubject(t, c, s.Subject("t", "p"))), seqs(1, 4))
	})
	t.Run("no-quorum", func(t *testing.T) {
		c := startCluster(t, 3, natsjstest.Options{})
		ensureStream(t, c, natsjs.StreamConfig{Replicas: 3})
		s := newStore(t, c, natsjs.Config{Timeout: 300 * time.Millisecond})
		// A new three-server stream may take longer than the short
		// timeout to answer its first batch (one full run of the package
		// in eight under -race on two cores): the timeout is for the
		// quorum loss below, so the first records go in with retries,
		// stored once whatever an earlier try did (the final check).
		waitFor(t, 20*time.Second, "the first append", func() bool { return s.Append("t", "p", 0, plainRecords(1, 2)) == nil })
		// Two of three servers down: the stream has no quorum (and the
		// client may have to move to the last server).
		c.Stop(1)
		c.Stop(2)
		start := time.Now()
		err := s.Append("t", "p", 0, plainRecords(3, 4))
		if !errors.Is(err, natsjs.ErrPublish) {
			t.Fatalf("Append without quorum: %v, want ErrPublish", err)
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("Append without quorum took %v, want about the 300ms timeout (plus one tail read)", el)
		}
		for _, i := range []int{1, 2} {
			if err := c.Restart(i); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.WaitReady(60 * time.Second); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 60*time.Second, "the append to go through", func() bool { return s.Append("t", "p", 0, plainRecords(3, 4)) == nil })
		checkSeqs(t, records(readSubject(t, c, s.Subject("t", "p"))), seqs(1, 4))
	})
}
