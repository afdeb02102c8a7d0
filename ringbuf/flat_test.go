package ringbuf

import "testing"

// flatRings makes newRing return rings of NewFlat (see TestFlatRing).
var flatRings bool

// newRing is New, or NewFlat while TestFlatRing runs the tests that use it.
func newRing[T any](limit int, maxBytes int64) (*Ring[T], error) {
	if flatRings {
		return NewFlat[T](limit, maxBytes)
	}
	return New[T](limit, maxBytes)
}

// TestFlatRing runs the ring's tests that do not depend on pages (claims,
// limits, waits, stamps, exactly-once resolution, the written cursor,
// concurrent claimers, allocations) on rings whose slots are one block.
func TestFlatRing(t *testing.T) {
	flatRings = true
	defer func() { flatRings = false }()
	for _, tc := range []struct {
		name string
		test func(*testing.T)
	}{
		{"FIFOAcrossManyWraps", TestFIFOAcrossManyWraps},
		{"TryClaimLimits", TestTryClaimLimits},
		{"ClaimWaitsForRelease", TestClaimWaitsForRelease},
		{"ClaimWaitsForBytes", TestClaimWaitsForBytes},
		{"ClaimCanceledAndClosed", TestClaimCanceledAndClosed},
		{"WaitPublishedWakesConsumer", TestWaitPublishedWakesConsumer},
		{"StampsRejectStalePositions", TestStampsRejectStalePositions},
		{"ResolveExactlyOnce", TestResolveExactlyOnce},
		{"ResolveWaitsForPublish", TestResolveWaitsForPublish},
		{"WaitHead", TestWaitHead},
		{"ConcurrentProducersLinearizable", TestConcurrentProducersLinearizable},
		{"SteadyStateAllocatesNothing", TestSteadyStateAllocatesNothing},
		{"FailedClaimWakesNobody", TestFailedClaimWakesNobody},
		{"MarkWrittenCursor", TestMarkWrittenCursor},
		{"ResolveExactlyOnceWithCursor", TestResolveExactlyOnceWithCursor},
		{"TryClaimNLimits", TestTryClaimNLimits},
		{"TryClaimNClosed", TestTryClaimNClosed},
		{"ClaimNWaitsForRelease", TestClaimNWaitsForRelease},
		{"ConcurrentClaimNLinearizable", TestConcurrentClaimNLinearizable},
		{"ClaimNAllocatesNothing", TestClaimNAllocatesNothing},
		{"DeadlineAtBesideReleases", TestDeadlineAtBesideReleases},
		{"DeadlineAtUnpublished", TestDeadlineAtUnpublished},
	} {
		t.Run(tc.name, tc.test)
	}
}

// TestFlatRingBlock: a flat ring allocates its block at the first claim,
// not before (Peek finds nothing), holds Cap slots, and reuses the same
// slots when positions wrap: a position and the one Cap after it share a
// slot, and a stale position's stamp does not match.
func TestFlatRingBlock(t *testing.T) {
	r, err := NewFlat[int](100, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if r.Cap() != 128 {
		t.Fatalf("Cap %d, want 128", r.Cap())
	}
	if r.Peek(0) != nil {
		t.Fatal("a slot before any claim")
	}
	for pos := uint64(0); pos < 300; pos++ {
		p, err := r.TryClaim(1)
		if err != nil || p != pos {
			t.Fatalf("claim %d: %d, %v", pos, p, err)
		}
		s := r.Slot(p)
		s.Value = int(p)
		r.Publish(p)
		if pos >= 128 && s != r.Peek(pos-128) {
			t.Fatalf("position %d and %d do not share a slot", pos, pos-128)
		}
		if pos >= 128 && r.State(pos-128) != Unpublished {
			t.Fatalf("position %d, long released, reads %v", pos-128, r.State(pos-128))
		}
		if !r.Transition(p, Pending, Acked) {
			t.Fatalf("transition of %d", p)
		}
		r.Release(p + 1)
	}
	if r.Bytes() != 0 || r.Len() != 0 {
		t.Fatalf("left: %d positions, %d bytes", r.Len(), r.Bytes())
	}
}

// TestNewFlatValidates: NewFlat refuses what New refuses, and limits above
// MaxFlat, whose block could not be allocated at once.
func TestNewFlatValidates(t *testing.T) {
	for _, tc := range []struct {
		limit int
		bytes int64
	}{{0, 1}, {1, 0}, {-1, 1}, {MaxFlat + 1, 1}} {
		if _, err := NewFlat[int](tc.limit, tc.bytes); err != ErrInvalidSize {
			t.Errorf("NewFlat(%d, %d): %v, want ErrInvalidSize", tc.limit, tc.bytes, err)
		}
	}
	r, err := NewFlat[int](MaxFlat, 1)
	if err != nil || !r.Flat() || r.Cap() != MaxFlat {
		t.Fatalf("NewFlat(MaxFlat): %v, flat %v, Cap %d", err, r != nil && r.Flat(), r.Cap())
	}
	if p, _ := New[int](4, 1); p.Flat() {
		t.Fatal("New made a flat ring")
	}
}
