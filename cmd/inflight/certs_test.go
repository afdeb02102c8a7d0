package main

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCertsRecipe: inflight certs writes a CA, a server certificate, client
// certificates and an access list, and prints the serve and produce
// commands that use them; run as printed (but on a free port, with a file
// store), serve takes producers over mutual TLS, produce as till-1 stores
// its messages, and a client writing under another's name is refused. Key
// files are the owner's only; a second run leaves the files alone unless
// -force.
func TestCertsRecipe(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	code, out, errOut := runCmd(t, "certs", "-dir="+dir, "-clients=till-1,till-2", "-topic=orders")
	require.Equal(t, exitOK, code, errOut)
	for _, name := range []string{"ca-key.pem", "server-key.pem", "till-1-key.pem", "till-2-key.pem"} {
		st, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o600), st.Mode().Perm(), name)
	}
	command := func(re string) []string {
		m := regexp.MustCompile(`(?m)^  inflight (` + re + `.*)$`).FindStringSubmatch(out)
		require.NotNil(t, m, "no %q command in:\n%s", re, out)
		return strings.Fields(m[1])
	}
	// setFlag replaces the value of flag in args (the printed form is
	// "-flag value").
	setFlag := func(args []string, flag, value string) []string {
		i := slices.Index(args, flag)
		require.True(t, i >= 0 && i+1 < len(args), "%s in %v", flag, args)
		args[i+1] = value
		return args
	}

	store := filepath.Join(t.TempDir(), "store")
	serveArgs := append(setFlag(command("serve "), "-listen", "127.0.0.1:0"), "-store=file:"+store, "-stats-every=0")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	log := newWatchWriter()
	wait := runAsync(t, ctx, log, log, serveArgs...)
	addr := log.wait(t, listeningLine, 10*time.Second)[1]
	log.wait(t, regexp.MustCompile(`TLS 1.3, client certificates required; access list`), 10*time.Second)

	produce := setFlag(command("produce .*-name till-1"), "-addr", addr)
	code, pout, perr := runCmd(t, append(produce, "-n=50", "-progress=1h")...)
	require.Equal(t, exitOK, code, "%s\n%s", pout, perr)
	assert.Contains(t, pout, "50 acked, 0 failed")

	intruder := setFlag(setFlag(command("produce .*-name till-2"), "-addr", addr), "-name", "till-1-b")
	code, pout, perr = runCmd(t, append(intruder, "-n=1", "-timeout=500ms", "-progress=1h")...)
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, pout, `certificate till-2 may not write as producer "till-1-b"`, "refused at HELLO, before any topic")
	assert.Regexp(t, `^inflight produce: 1 message failed: `, perr, "why it failed, on stderr")
	stop()
	require.Equal(t, exitOK, wait(), log.String())

	code, records, errOut := runCmd(t, "read", "-store=file:"+store)
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, 50, strings.Count(records, `topic="orders" producer="till-1" seq=`), records)
	assert.Equal(t, 50, strings.Count(records, "\n"))

	before, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	require.NoError(t, err)
	code, _, errOut = runCmd(t, "certs", "-dir="+dir, "-clients=till-1,till-2")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, errOut, "already holds ca.pem")
	after, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	require.NoError(t, err)
	assert.Equal(t, before, after, "left alone")
	code, _, errOut = runCmd(t, "certs", "-dir="+dir, "-clients=till-1", "-force")
	assert.Equal(t, exitOK, code, errOut)

	for _, args := range [][]string{
		{"certs"}, {"certs", "-dir=" + dir, "-clients=../x"}, {"certs", "-dir=" + dir, "-clients=ca"},
		{"certs", "-dir=" + dir, "-hosts=a b"}, {"certs", "-dir=" + dir, "-hosts="}, {"certs", "-dir=" + dir, "-topic=a b"},
		{"certs", "-dir=" + dir, "-valid=0s"},
	} {
		code, _, errOut := runCmd(t, args...)
		assert.Equal(t, exitUsage, code, "%v: %s", args, errOut)
	}
}
