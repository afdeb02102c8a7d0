package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/inflightmq/inflight/internal/leakcheck"
)

func TestMain(m *testing.M) {
	if serveChild() { // re-executed as a broker by TestServeSurvivesKill9
		return
	}
	goleak.VerifyTestMain(m, leakcheck.NATSOptions()...) // it runs nats-server for -store nats://
}

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runCmdInput(t, "", args...)
}

// runCmdInput is runCmd with stdin holding input.
func runCmdInput(t *testing.T, input string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(input), &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestDemoGuaranteesHold runs the main job briefly, with the broker killed
// several times, and checks its report: one producer writes three topics
// round robin, each has successes, and the per-topic counts add up.
func TestDemoGuaranteesHold(t *testing.T) {
	code, out, errOut := runCmd(t, "demo", "-duration=1500ms", "-kill-every=300ms", "-down-for=100ms", "-timeout=500ms", "-max-pending=4096")
	t.Log(out)
	require.Equal(t, exitOK, code, "stderr: %s", errOut)
	assert.Contains(t, out, "all guarantees held")
	for _, line := range []string{"sent = acked + failed", "every callback exactly once", "success order = send order",
		"broker duplicates", "broker stored in send order", "success but missing from the broker",
		"stored topic, key and header = sent"} {
		assert.Regexp(t, regexp.QuoteMeta(line)+`\s+ok`, out)
	}
	assert.Regexp(t, `broker killed [2-9] times`, out) // 3 expected; a loaded machine may fit 2
	m := regexp.MustCompile(`(?m)^  acked ([\d,]+),.*\n.*\n  acked by topic: demo.orders ([\d,]+) demo.payments ([\d,]+) demo.audit ([\d,]+)$`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	var n [4]uint64
	for i := range n {
		v, err := strconv.ParseUint(strings.ReplaceAll(m[i+1], ",", ""), 10, 64)
		require.NoError(t, err)
		n[i] = v
	}
	assert.Equal(t, n[0], n[1]+n[2]+n[3], "the topics' successes add up to the total")
	for i := 1; i < 4; i++ {
		assert.Positive(t, n[i], "topic %d has successes", i)
	}
}

func TestBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"nope"},
		{"demo", "-duration=0"},
		{"demo", "-size=4"},
		{"demo", "-codec=lz77"},
		{"demo", "-bogus"},
		{"demo", "extra"},
		{"serve", "-store=tape"},
		{"serve", "-store=file:x", "-fsync=sometimes"},
		{"serve", "-stats-every=-1s"},
		{"serve", "-fsync=none"},                      // does not apply to -store mem
		{"serve", "-repair"},                          // neither
		{"serve", "-store=file:x", "-fsync-every=1s"}, // applies to -fsync interval only
		{"serve", "-segment-bytes=4096"},              // file store flags, with -store mem
		{"serve", "-retain-age=1h"},
		{"serve", "-verify"},
		{"serve", "-store=file:x", "-segment-bytes=100"},
		{"serve", "-store=file:x", "-retain-age=-1s"},
		{"serve", "-store=file:x", "-retain-bytes=-1"},
		{"serve", "-forget-producers-after=720h"},
		{"serve", "-store=file:x", "-forget-producers-after=-1h"},
		{"serve", "-log-format=xml"},
		{"serve", "-max-conns=0"},
		{"serve", "-max-frame=10"},
		{"serve", "-idle-timeout=0s"},
		{"serve", "-shutdown-timeout=-1s"},
		{"read"},
		{"read", "-store=mem"},
		{"read", "-store=file:x", "-format=xml"},
		{"read", "-store=file:x", "-n=-1"},
		{"produce", "-n=0"},
		{"produce", "-size=8"},
		{"produce", "-rate=-1"},
		{"produce", "-addr=no-port"},
		{"produce", "-topic=a b"},
		{"produce", "-header=novalue"},
		{"produce", "-header==v"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, _, errOut := runCmd(t, args...)
			assert.Equal(t, exitUsage, code)
			assert.NotEmpty(t, errOut, "a usage error says why")
		})
	}
}

// TestHelpOnEveryCommand: -h, -help and `inflight help CMD` print the
// command's usage on stdout and exit 0, for every command; `inflight -h`
// and `inflight help` list every command.
func TestHelpOnEveryCommand(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}, {"help", "help"}} {
		code, out, errOut := runCmd(t, args...)
		assert.Equal(t, exitOK, code, "%v", args)
		assert.Empty(t, errOut, "%v", args)
		for _, cmd := range commands {
			assert.Regexp(t, `(?m)^  `+cmd+` `, out, "%v lists %s", args, cmd)
		}
	}
	for _, cmd := range commands {
		var usage string
		for _, args := range [][]string{{cmd, "-h"}, {cmd, "-help"}, {cmd, "--help"}, {"help", cmd}} {
			code, out, errOut := runCmd(t, args...)
			assert.Equal(t, exitOK, code, "%v", args)
			assert.Empty(t, errOut, "%v: usage goes to stdout", args)
			assert.True(t, strings.HasPrefix(out, "usage: inflight "+cmd), "%v: %q", args, out)
			if usage == "" {
				usage = out
			}
			assert.Equal(t, usage, out, "%v prints what %s -h prints", args, cmd)
		}
	}
	for _, args := range [][]string{{"help", "nope"}, {"help", "serve", "read"}} {
		code, out, errOut := runCmd(t, args...)
		assert.Equal(t, exitUsage, code, "%v", args)
		assert.Empty(t, out)
		assert.Contains(t, errOut, "see 'inflight -h'")
	}
}

// TestMistypedFlag: a flag that is not defined, a value that does not
// parse, or a stray argument gives one line saying why, naming the flags it
// may be a typo of, and a pointer to -h, on stderr; exit 2.
func TestMistypedFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"produce", "-token=secret"}, "unknown flag -token (did you mean -token-file?); a token is read from -token-file FILE or $INFLIGHT_TOKEN"},
		{[]string{"serve", "-lisetn=:1"}, "unknown flag -lisetn (did you mean -listen?)"},
		{[]string{"produce", "-tls-certificate=x"}, "unknown flag -tls-certificate (did you mean -tls-cert?)"},
		{[]string{"read", "-zzz"}, "unknown flag -zzz"},
		{[]string{"demo", "-duration"}, "flag needs an argument: -duration"},
		{[]string{"produce", "-n", "many"}, `invalid value "many" for flag -n`},
		{[]string{"read", "extra"}, `unexpected argument "extra"`},
		{[]string{"version", "extra"}, `unexpected argument "extra"`},
		{[]string{"version", "-v"}, `unknown flag -v`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runCmd(t, tc.args...)
			assert.Equal(t, exitUsage, code)
			assert.Empty(t, out)
			assert.True(t, strings.HasPrefix(errOut, "inflight "+tc.args[0]+": "), errOut)
			assert.Contains(t, errOut, tc.says)
			assert.True(t, strings.HasSuffix(errOut, "\nsee 'inflight "+tc.args[0]+" -h'\n"), errOut)
			assert.Equal(t, 2, strings.Count(errOut, "\n"), "one line and the pointer: %q", errOut)
		})
	}
	code, _, errOut := runCmd(t, "sreve")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "inflight: unknown command \"sreve\" (did you mean serve?)\nsee 'inflight -h'\n", errOut)
}
