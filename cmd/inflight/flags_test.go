package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestBadFlagValuesExit2: a flag value that does not parse, or parses but
// makes no sense, exits 2 with a message naming the flag, before anything
// starts.
func TestBadFlagValuesExit2(t *testing.T) {
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"serve", "-listen", "nonsense"}, "-listen"},
		{[]string{"serve", "-listen", "127.0.0.1:99999"}, "-listen"},
		{[]string{"serve", "-metrics", "nonsense"}, "-metrics"},
		{[]string{"serve", "-stats-every", "often"}, "-stats-every"},
		{[]string{"serve", "-repair=maybe"}, "-repair"},
		{[]string{"produce", "-addr", "nonsense"}, "-addr"},
		{[]string{"produce", "-addr", "host:port"}, "-addr"},
		{[]string{"produce", "-n", "many"}, "-n"},
		{[]string{"produce", "-timeout", "10"}, "-timeout"},
		{[]string{"produce", "-codec", "lz4"}, "codec"},
		{[]string{"demo", "-duration", "-1s"}, "-duration"},
		{[]string{"demo", "-max-pending", "0"}, "-max-pending"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, errOut := runCmd(t, tc.args...)
			assert.Equal(t, exitUsage, code)
			assert.Contains(t, errOut, tc.says)
		})
	}
}
