package core

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestLingerForFollowsFullFrames: Linger waits for MaxBatchMessages until a
// frame is closed by a byte bound, then for as many records as the last
// such frame held, until a frame fills by its count or holds that many in
// less than half the bytes (the records got smaller): then for
// MaxBatchMessages again. A message beyond the bound alone in its frame,
// and a frame that ran out short of the count or at half the bytes or
// more, change nothing.
func TestLingerForFollowsFullFrames(t *testing.T) {
	const maxMessages = 4096
	var l lane
	for _, step := range []struct {
		n, closedAt, size int
		want              int
	}{
		{0, 0, 0, maxMessages},                   // nothing written yet
		{130, 128 << 10, 128 << 10, 130},         // closed at the cached bound
		{20, 0, 20 << 10, 130},                   // ran out short of 130: as before
		{1, 1 << 20, 3 << 20, 130},               // a message beyond the limit, alone
		{130, 0, 78 << 10, 130},                  // 130 in 78 KiB: more than half the bytes
		{130, 0, 60 << 10, maxMessages},          // 130 in 60 KiB: smaller records
		{1020, 1 << 20, 1 << 20, 1020},           // closed at the limit
		{maxMessages, 0, 420 << 10, maxMessages}, // full by its count
		{50, 0, 5 << 10, maxMessages},            // ran out: as before
	} {
		if step.n > 0 {
			l.noteFrame(step.n, step.closedAt, step.size, maxMessages)
		}
		assert.Equal(t, step.want, lingerFor(&l, maxMessages), "after a frame of %d records, %d bytes, closed at %d", step.n, step.size, step.closedAt)
	}
}
