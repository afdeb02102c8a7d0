package inflight_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

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

// TestREADMEModuleStepsWork follows the README's "Use it in your module"
// steps, its sh block as it stands, in a new directory, with the
// checkout's path for ../inflight: a module that requires this one,
// unpublished, through a replace and go mod tidy, builds and prints what
// the README says. The go command gets -mod=mod and the environment as it
// is (its module proxy and cache): nothing but the proxy is reached.
func TestREADMEModuleStepsWork(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH: the README's steps run it")
	}
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	section, ok := strings.CutPrefix(string(readme[strings.Index(string(readme), "\n## Use it in your module\n")+1:]), "## Use it in your module\n")
	require.True(t, ok, "README.md has no '## Use it in your module' section")
	start := strings.Index(section, "\n```sh\n")
	require.True(t, start >= 0, "the section has an sh block")
	script, _, ok := strings.Cut(section[start+len("\n```sh\n"):], "\n```\n")
	require.True(t, ok)
	require.Contains(t, script, "=../inflight ", "the steps name the checkout ../inflight")
	want := regexp.MustCompile(`(?m)^go run \.\s+# prints: (.*)$`).FindStringSubmatch(script)
	require.NotNil(t, want, "the steps end with go run . and what it prints")

	root, err := filepath.Abs(".")
	require.NoError(t, err)
	dir := t.TempDir()
	script = strings.ReplaceAll(script, "=../inflight ", "="+root+" ")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "steps.sh"), []byte("set -e\n"+script+"\n"), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a watchdog: go may fetch from the proxy
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "steps.sh")
	cmd.Dir = dir
	// The go found above first on PATH; the proxy, cache and the rest as
	// they are.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "PATH="+filepath.Dir(goBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the README's steps failed:\n%s", out)
	assert.Contains(t, string(out), want[1]+"\n")
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	require.NoError(t, err)
	assert.Contains(t, string(mod), "require github.com/inflightmq/inflight v0.0.0-00010101000000-000000000000")
	assert.Contains(t, string(mod), "replace github.com/inflightmq/inflight => "+root)
}
