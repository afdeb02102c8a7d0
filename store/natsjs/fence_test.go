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

// TestWritersClaimTheFence: on a stream of one replica a fast batch's
// records check the name's fence alone, so the store writes one only under
// a fence it wrote itself, with the subject's tail known since. Here two
// stores serve the same incarnation, each with a stale idea of what the
// other wrote: every record is stored once, in order.
//
//   - B, writing atomic batches (native without fast batches, or packed),
//     claims the fence before it writes: A's next fast batch, on A's stale
//     tail, is refused (else it would store 11..20 a second time);
//   - B claims and writes topic u while A's tail of u is known under A's
//     older fence: A re-reads it before its next fast batch on u, after
//     its claim for topic t moved the fence again.
func TestWritersClaimTheFence(t *testing.T) {
	c := startCluster(t, 1, natsjstest.Options{})
	ensureStream(t, c, natsjs.StreamConfig{})
	for _, bcfg := range []natsjs.Config{natsjs.NoFastBatch(natsjs.Config{}), {Layout: natsjs.LayoutPacked}, {}} {
		p := "claim-" + bcfg.Layout.String()
		if natsjs.IsNoFastBatch(bcfg) {
			p += "-atomic"
		}
		t.Run(p, func(t *testing.T) {
			a, b := newStore(t, c, natsjs.Config{}), newStore(t, c, bcfg)
			if !natsjs.UsesFastBatch(a) {
				t.Fatal("store A does not write fast batches")
			}
			if err := a.Fence(p, 1); err != nil {
				t.Fatal(err)
			}
			for _, topic := range []string{"t", "u"} {
				if err := a.Append(topic, p, 1, plainRecords(seqs(1, 10)...)); err != nil {
					t.Fatal(err)
				}
				if last, err := lastSeq(b.State(topic, p)); err != nil || last != 10 {
					t.Fatalf("%s: B's state %d, %v", topic, last, err)
				}
			}
			if err := b.Append("t", p, 1, plainRecords(seqs(11, 10)...)); err != nil {
				t.Fatal(err)
			}
			if err := a.Append("t", p, 1, plainRecords(seqs(11, 20)...)); err != nil {
				t.Fatal(err)
			}
			if err := b.Append("u", p, 1, plainRecords(seqs(11, 10)...)); err != nil {
				t.Fatal(err)
			}
			if err := a.Append("t", p, 1, plainRecords(seqs(31, 5)...)); err != nil {
				t.Fatal(err)
			}
			if err := a.Append("u", p, 1, plainRecords(seqs(11, 20)...)); err != nil {
				t.Fatal(err)
			}
			checkSeqs(t, records(readSubject(t, c, a.Subject("t", p))), seqs(1, 35))
			checkSeqs(t, records(readSubject(t, c, a.Subject("u", p))), seqs(1, 30))
		})
	}
}
