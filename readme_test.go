package inflight_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// quoteMark is the comment above every Go block of the README: it names the
// file the block quotes.
var quoteMark = regexp.MustCompile(`^<!-- quoted from (\S+): TestREADMEQuotesExamples fails if they differ -->$`)

// TestREADMEQuotesExamples: every Go block of README.md and of the pages in
// docs/ quotes, verbatim, a file of Example functions that go test
// compiles and checks, so the documentation's code compiles and does what
// its output says.
func TestREADMEQuotesExamples(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join("docs", "*.md"))
	require.NoError(t, err)
	var quoted []string
	for _, page := range append([]string{"README.md"}, pages...) {
		quoted = append(quoted, checkQuotes(t, page)...)
	}
	assert.Subset(t, quoted, []string{"core/example_test.go", "transport/mem/example_test.go",
		"transport/tcp/example_test.go", "broker/example_test.go", "server/example_test.go",
		"store/natsjs/example_test.go"})
}

// checkQuotes checks the Go blocks of one Markdown file and returns the
// files they quote. A quoted path is relative to the repository's root.
func checkQuotes(t *testing.T, page string) []string {
	t.Helper()
	f, err := os.Open(page)
	require.NoError(t, err)
	defer f.Close()
	var (
		lines  = bufio.NewScanner(f)
		n      int
		prev   string // the previous line
		quoted []string
	)
	for lines.Scan() {
		n++
		line := lines.Text()
		if strings.TrimSpace(line) != "```go" {
			prev = line
			continue
		}
		start := n
		var block strings.Builder
		for lines.Scan() {
			n++
			if lines.Text() == "```" {
				break
			}
			block.WriteString(lines.Text() + "\n")
		}
		m := quoteMark.FindStringSubmatch(prev)
		if !assert.NotNil(t, m, "%s:%d: a Go block without a <!-- quoted from FILE: ... --> line above it", page, start) {
			continue
		}
		path := filepath.FromSlash(m[1])
		want, err := os.ReadFile(path)
		if !assert.NoError(t, err, "%s:%d", page, start) {
			continue
		}
		assert.True(t, strings.HasSuffix(path, "_test.go") && strings.Contains(string(want), "\nfunc Example"),
			"%s:%d: %s is not a file of Example functions", page, start, path)
		assert.Equal(t, string(want), block.String(), "%s:%d differs from %s: copy the file into it", page, start, path)
		quoted = append(quoted, m[1])
		prev = ""
	}
	require.NoError(t, lines.Err())
	return quoted
}
