package core

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestLingerForFollowsFullFrames: Linger waits for MaxBatchMessages until a
// frame is closed by a byte bound, then for as many records as the last
// such frame held, until a frame fills by its count (the records got
// smaller): then for MaxBatchMessages again. A frame that ran out of
// records changes nothing.
func TestLingerForFollowsFullFrames(t *testing.T) {
	const max = 4096
	var l lane
	for _, step := range []struct {
		n, closedAt int
		want        int
	}{
		{0, 0, max},           // nothing written yet
		{130, 128 << 10, 130}, // closed at the cached bound
		{20, 0, 130},          // ran out: as before
		{1020, 1 << 20, 1020}, // closed at the limit
		{max, 0, max},         // full by its count
		{50, 0, max},          // ran out: as before
	} {
		if step.n > 0 {
			l.noteFrame(step.n, step.closedAt, max)
		}
		assert.Equal(t, step.want, lingerFor(&l, max), "after a frame of %d closed at %d", step.n, step.closedAt)
	}
}
