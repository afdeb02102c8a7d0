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
