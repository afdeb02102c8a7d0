package natsjs_test

import (
	"os"
	"regexp"
	"testing"
)

// TestREADMEQuotesExample: the Go block of this module's README.md is
// example_test.go, verbatim, which go test compiles and runs: the README's
// code compiles and does what it says.
func TestREADMEQuotesExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- quoted from example_test.go: [^\n]*-->\n```go\n(.*?)```\n").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no Go block quoted from example_test.go")
	}
	want, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	if string(m[1]) != string(want) {
		t.Fatal("README.md's Go block differs from example_test.go: copy the file into it")
	}
}
