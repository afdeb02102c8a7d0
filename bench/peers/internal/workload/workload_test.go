package workload

import (
	"bytes"
	"slices"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPayload(t *testing.T) {
	a, b := Payload(1000), Payload(1000)
	if len(a) != 1000 || !bytes.Equal(a, b) {
		t.Fatalf("Payload(1000): length %d, repeatable %v", len(a), bytes.Equal(a, b))
	}
	if bytes.Count(a, a[:1]) > 50 {
		t.Errorf("Payload(1000) repeats its first byte %d times: not random", bytes.Count(a, a[:1]))
	}
	if len(Payload(0)) != 0 {
		t.Error("Payload(0) is not empty")
	}
}

func TestPayloads(t *testing.T) {
	for _, size := range []int{1, 7, 100, 1024} {
		ps := Payloads(size, 64)
		if len(ps) != 64 || !bytes.Equal(ps[0], Payload(size)) {
			t.Fatalf("Payloads(%d, 64): %d payloads, first is Payload(%d): %v", size, len(ps), size, bytes.Equal(ps[0], Payload(size)))
		}
		seen := map[string]bool{}
		for i, p := range ps {
			if len(p) != size {
				t.Fatalf("Payloads(%d, 64)[%d] has %d bytes", size, i, len(p))
			}
			seen[string(p)] = true
		}
		// One byte has 256 values: 64 draws of it may collide.
		if size > 1 && len(seen) != len(ps) {
			t.Errorf("Payloads(%d, 64): %d distinct", size, len(seen))
		}
		if again := Payloads(size, 64); !slices.EqualFunc(ps, again, bytes.Equal) {
			t.Errorf("Payloads(%d, 64) is not repeatable", size)
		}
	}
	for size, want := range map[int]int{16: 1 << 20, 100: 671088, 1024: 65536, 16384: 4096, 1 << 20: 1024} {
		if got := PoolSize(size); got != want {
			t.Errorf("PoolSize(%d) = %d, want %d", size, got, want)
		}
	}
}

func TestParseSizes(t *testing.T) {
	got, err := ParseSizes("100, 1024,16384")
	if err != nil || !slices.Equal(got, []int{100, 1024, 16384}) {
		t.Fatalf("ParseSizes = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "-1", "1k", "100,,200"} {
		if _, err := ParseSizes(bad); err == nil {
			t.Errorf("ParseSizes(%q) accepted", bad)
		}
	}
}
