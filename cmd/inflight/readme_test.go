package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestREADMEListsEveryFlag: the documentation's page on the command
// (docs/serve.md, its section "The command") names every flag of every
// command, and every command.
func TestREADMEListsEveryFlag(t *testing.T) {
	readme, err := os.ReadFile("../../docs/serve.md")
	require.NoError(t, err)
	section, ok := strings.CutPrefix(string(readme[strings.Index(string(readme), "\n## The command\n")+1:]), "## The command\n")
	require.True(t, ok, "docs/serve.md has no '## The command' section")
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	flagLine := regexp.MustCompile(`(?m)^  -(\S+)`)
	for _, cmd := range []string{"serve", "produce", "demo", "read", "certs"} {
		assert.Contains(t, section, "- `"+cmd+"`", "docs/serve.md describes %s", cmd)
		_, help, _ := runCmd(t, cmd, "-h")
		flags := flagLine.FindAllStringSubmatch(help, -1)
		require.NotEmpty(t, flags, "%s -h lists its flags", cmd)
		for _, f := range flags {
			assert.Contains(t, section, "`-"+f[1], "docs/serve.md mentions %s -%s", cmd, f[1])
		}
	}
	assert.Contains(t, section, "- `version`")
}
