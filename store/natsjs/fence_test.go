package natsjs_test

import (
	"errors"
	"testing"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/store/natsjs"
	"github.com/inflightmq/inflight/store/natsjs/natsjstest"
)

// TestFence: the store keeps a producer name's epoch in the subject's
// messages. A fence needs an epoch above the stored one; a write of a lower
// epoch is refused, also when the store's idea of the tail is stale (its
// compare-and-set fails, and the tail it reads then has the newer epoch);
// readers skip the fence messages.
func TestFence(t *testing.T) {
	c := startCluster(t, 1, natsjstest.Options{})
	ensureStream(t, c, natsjs.StreamConfig{})
	for _, l := range []natsjs.Layout{natsjs.LayoutPacked, natsjs.LayoutNative} {
		t.Run(l.String(), func(t *testing.T) {
			p := "fence-" + l.String()
			a, b := newStore(t, c, natsjs.Config{Layout: l}), newStore(t, c, natsjs.Config{Layout: l})
			state := func(s *natsjs.Store) broker.NameState {
				t.Helper()
				st, err := s.State("t", p)
				if err != nil {
					t.Fatal(err)
				}
				return st
			}
			if st := state(a); st != (broker.NameState{}) {
				t.Fatalf("state of a new name %+v", st)
			}
			if err := a.Fence(p, 1); err != nil {
				t.Fatalf("Fence(1): %v", err)
			}
			if err := a.Append("t", p, 0, plainRecords(1, 2)); !errors.Is(err, broker.ErrFenced) {
				t.Fatalf("Append of epoch 0 after a fence of 1: %v", err)
			}
			if err := a.Append("t", p, 1, plainRecords(1, 2, 3)); err != nil {
				t.Fatal(err)
			}
			if st := state(b); st != (broker.NameState{LastSeq: 3, Epoch: 1}) {
				t.Fatalf("state %+v, want last 3, epoch 1", st)
			}
			// b read the tail; a fences 2: b's idea of the tail is stale.
			if err := a.Fence(p, 1); !errors.Is(err, broker.ErrFenced) {
				t.Fatalf("Fence(1) again: %v", err)
			}
			if err := a.Fence(p, 2); err != nil {
				t.Fatalf("Fence(2): %v", err)
			}
			conflicts := b.Stats().Conflicts
			if err := b.Append("t", p, 1, plainRecords(4, 5)); !errors.Is(err, broker.ErrFenced) {
				t.Fatalf("Append of epoch 1 after a fence of 2: %v", err)
			}
			if b.Stats().Conflicts != conflicts+1 {
				t.Errorf("conflicts %d, want %d: the stale write must lose its compare-and-set", b.Stats().Conflicts, conflicts+1)
			}
			// Likewise a fence of an epoch another store fenced meanwhile.
			if st := state(b); st != (broker.NameState{LastSeq: 3, Epoch: 2}) {
				t.Fatalf("state %+v, want last 3, epoch 2", st)
			}
			if err := a.Fence(p, 3); err != nil {
				t.Fatal(err)
			}
			if err := b.Fence(p, 3); !errors.Is(err, broker.ErrFenced) {
				t.Fatalf("a second Fence(3): %v", err)
			}
			if err := b.Fence(p, 4); err != nil {
				t.Fatalf("Fence(4): %v", err)
			}
			if err := b.Append("t", p, 4, plainRecords(4)); err != nil {
				t.Fatal(err)
			}
			if st := state(a); st != (broker.NameState{LastSeq: 4, Epoch: 4}) {
				t.Fatalf("state %+v, want last 4, epoch 4", st)
			}
			checkSeqs(t, records(readSubject(t, c, a.Subject("t", p))), seqs(1, 4))
		})
	}
}
