package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestREADMEListsEveryFlag: the README's section on the command names every
// flag of every command, and every command.
func TestREADMEListsEveryFlag(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	section, ok := strings.CutPrefix(string(readme[strings.Index(string(readme), "\n## The command\n")+1:]), "## The command\n")
	require.True(t, ok, "README.md has no '## The command' section")
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	flagLine := regexp.MustCompile(`(?m)^  -(\S+)`)
	for _, cmd := range []string{"serve", "produce", "demo", "read"} {
		assert.Contains(t, section, "- `"+cmd+"`", "the README describes %s", cmd)
		_, help, _ := runCmd(t, cmd, "-h")
		flags := flagLine.FindAllStringSubmatch(help, -1)
		require.NotEmpty(t, flags, "%s -h lists its flags", cmd)
		for _, f := range flags {
			assert.Contains(t, section, "`-"+f[1], "the README mentions %s -%s", cmd, f[1])
		}
	}
	assert.Contains(t, section, "- `version`")
}
