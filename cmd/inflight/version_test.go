package main

import (
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestVersion: `inflight version` prints one line with the version (the
// -ldflags one when set) and the Go version.
func TestVersion(t *testing.T) {
	code, out, _ := runCmd(t, "version")
	assert.Equal(t, exitOK, code)
	assert.Regexp(t, `^inflight \S+ \(.*`+regexp.QuoteMeta(runtime.Version())+` \S+/\S+\)\n$`, out)

	defer func(v string) { version = v }(version)
	version = "v1.2.3"
	code, out, _ = runCmd(t, "version")
	assert.Equal(t, exitOK, code)
	assert.True(t, strings.HasPrefix(out, "inflight v1.2.3 ("), out)

	code, _, errOut := runCmd(t, "version", "extra")
	assert.Equal(t, exitUsage, code)
	assert.NotEmpty(t, errOut)
}
