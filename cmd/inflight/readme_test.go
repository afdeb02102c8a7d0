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

// TestHelpPointsToDocs: where a command's -h sends the reader to the
// documentation ("see SECTION in docs/PAGE.md"), the page exists and has
// that section, and no -h sends them to the README for what it does not
// say.
func TestHelpPointsToDocs(t *testing.T) {
	ref := regexp.MustCompile(`see ([A-Z][\w ]*?)\s+in\s+(docs/\w+\.md)`)
	found := 0
	for _, cmd := range commands {
		_, help, _ := runCmd(t, cmd, "-h")
		assert.NotContains(t, help, "README", "%s -h", cmd)
		for _, m := range ref.FindAllStringSubmatch(help, -1) {
			found++
			page, err := os.ReadFile("../../" + m[2])
			if !assert.NoError(t, err, "%s -h names %s", cmd, m[2]) {
				continue
			}
			assert.Regexp(t, `(?m)^#+ `+regexp.QuoteMeta(m[1])+`$`, string(page), "%s -h: %s has a section %q", cmd, m[2], m[1])
		}
	}
	assert.Positive(t, found, "serve -h points to Forgotten producers")
}
