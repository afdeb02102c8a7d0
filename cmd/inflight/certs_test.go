package main

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recipeCommand returns the arguments of the command that certs printed
// (out) on a line matching "  inflight <re>...".
func recipeCommand(t *testing.T, out, re string) []string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^  inflight (` + re + `.*)$`).FindStringSubmatch(out)
	require.NotNil(t, m, "no %q command in:\n%s", re, out)
	return strings.Fields(m[1])
}

// setFlag replaces the value of flag in args (the printed form is "-flag
// value").
func setFlag(t *testing.T, args []string, flag, value string) []string {
	t.Helper()
	i := slices.Index(args, flag)
	require.True(t, i >= 0 && i+1 < len(args), "%s in %v", flag, args)
	args = slices.Clone(args)
	args[i+1] = value
	return args
}

// startRecipeServe runs the serve command certs printed, as printed but
// on a free port, until the test ends; it returns the address and the log.
func startRecipeServe(t *testing.T, out string) (string, *watchWriter) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	log := newWatchWriter()
	wait := runAsync(t, ctx, log, log, setFlag(t, recipeCommand(t, out, "serve "), "-listen", "127.0.0.1:0")...)
	t.Cleanup(func() {
		stop()
		assert.Equal(t, exitOK, wait(), log.String())
	})
	addr := log.wait(t, listeningLine, 10*time.Second)[1]
	log.wait(t, regexp.MustCompile(`TLS 1.3, client certificates required; access list`), 10*time.Second)
	return addr, log
}

// TestCertsRecipe: inflight certs writes a CA, a server certificate, client
// certificates and an access list, and prints the serve and produce
// commands that use them; run as printed (but on a free port), serve takes
// producers over mutual TLS, produce as till-1 stores its messages, and a
// client writing under another's name is refused. Key files are the
// owner's only; a second run leaves the files alone unless -force.
func TestCertsRecipe(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	code, out, errOut := runCmd(t, "certs", "-dir="+dir, "-clients=till-1,till-2", "-topic=orders")
	require.Equal(t, exitOK, code, errOut)
	for _, name := range []string{"ca-key.pem", "server-key.pem", "till-1-key.pem", "till-2-key.pem"} {
		st, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o600), st.Mode().Perm(), name)
	}
	command := func(re string) []string { return recipeCommand(t, out, re) }
	setFlag := func(args []string, flag, value string) []string { return setFlag(t, args, flag, value) }
	addr, _ := startRecipeServe(t, out)

	produce := setFlag(command("produce .*-name till-1 "), "-addr", addr)
	code, pout, perr := runCmd(t, append(produce, "-n=50", "-progress=0")...)
	require.Equal(t, exitOK, code, "%s\n%s", pout, perr)
	assert.Contains(t, pout, "50 acked, 0 failed")

	intruder := setFlag(setFlag(command("produce .*-name till-2 "), "-addr", addr), "-name", "till-1-b")
	code, pout, perr = runCmd(t, append(intruder, "-n=1", "-timeout=500ms", "-progress=0")...)
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, pout, `certificate till-2 may not write as producer "till-1-b"`, "refused at HELLO, before any topic")
	assert.Regexp(t, `^inflight produce: 1 message failed: `, perr, "why it failed, on stderr")

	code, records, errOut := runCmd(t, command("read ")...)
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

// TestCertsRecipeCommandsComplete: every command certs prints has what it
// needs and runs as printed (but on a free port): every file or directory
// it names exists; serve stores into a file store in the directory certs
// made, and warns of nothing; each produce sends a bounded number of
// messages (-n), which are stored; read reads the store serve writes.
func TestCertsRecipeCommandsComplete(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	code, out, errOut := runCmd(t, "certs", "-dir="+dir, "-clients=till-1,till-2", "-topic=orders")
	require.Equal(t, exitOK, code, errOut)
	lines := regexp.MustCompile(`(?m)^  inflight (\w+) (.*)$`).FindAllStringSubmatch(out, -1)
	flagsOf := map[string][]map[string]string{}
	for _, l := range lines {
		args := strings.Fields(l[2])
		flags := map[string]string{}
		for i := 0; i < len(args); i += 2 {
			require.True(t, strings.HasPrefix(args[i], "-") && i+1 < len(args), "%s: -flag value pairs: %q", l[1], l[2])
			flags[args[i]] = args[i+1]
		}
		for _, v := range flags {
			if strings.HasPrefix(strings.TrimPrefix(v, "file:"), dir) {
				_, err := os.Stat(filepath.Dir(strings.TrimPrefix(v, "file:")))
				assert.NoError(t, err, "%s names %s", l[1], v)
				if !strings.HasPrefix(v, "file:") {
					_, err := os.Stat(v)
					assert.NoError(t, err, "%s names %s", l[1], v)
				}
			}
		}
		flagsOf[l[1]] = append(flagsOf[l[1]], flags)
	}
	require.Len(t, flagsOf["serve"], 1)
	require.Len(t, flagsOf["produce"], 2, "one per client")
	require.Len(t, flagsOf["read"], 1)
	serve := flagsOf["serve"][0]
	assert.Equal(t, "file:"+filepath.Join(dir, certsStore), serve["-store"], "a file store, in the directory certs made")
	assert.Equal(t, serve["-store"], flagsOf["read"][0]["-store"], "read reads what serve stores")
	for _, p := range flagsOf["produce"] {
		assert.Equal(t, strconv.Itoa(certsMessages), p["-n"], "produce %s sends a bounded number of messages", p["-name"])
	}

	addr, log := startRecipeServe(t, out)
	for _, name := range []string{"till-1", "till-2"} {
		produce := setFlag(t, recipeCommand(t, out, "produce .*-name "+name+" "), "-addr", addr)
		code, pout, perr := runCmd(t, produce...)
		require.Equal(t, exitOK, code, "%s\n%s", pout, perr)
		assert.Contains(t, pout, "1,000 acked, 0 failed", name)
		assert.NotContains(t, strings.ToLower(pout+perr), "warning", name)
	}
	code, records, errOut := runCmd(t, recipeCommand(t, out, "read ")...)
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, 2*certsMessages, strings.Count(records, `topic="orders" producer="till-`))
	assert.NotContains(t, log.String(), "level=WARN", "serve as printed warns of nothing")
}

// TestCommandShipsNoTestSupport: the command's build (go list -deps, test
// files aside) holds none of the repository's test scaffolding: demo -tls
// makes its CA with certs' code, not internal/testcert.
func TestCommandShipsNoTestSupport(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH: cannot list the command's dependencies")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, pkg := range strings.Fields(string(out)) {
		for _, support := range []string{"testcert", "testkit", "leakcheck", "faultproxy", "gate", "loopback"} {
			assert.NotEqual(t, "github.com/inflightmq/inflight/internal/"+support, pkg, "a package of test support in the command")
		}
	}
}
