package testkit

import "runtime/debug"

// RaceEnabled reports whether the test binary was built with -race. The
// race detector makes allocation figures meaningless: sync.Pool.Put drops
// one item in four (zstd's decoders and s2's encoders pool their tables,
// the file store its record readers), and the compiler no longer turns
// append(s, make([]T, n)...), which slices.Grow is, into a single
// allocation (measured: twice the bytes).
var RaceEnabled = func() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}()
