package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServeFatalErrorOnStderr: with its port taken, serve exits 1 and says
// why on stderr, with its log (stdout) thrown away; over TCP (gnet) and
// over TLS (stdnet).
func TestServeFatalErrorOnStderr(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	s := startSecuredServe(t) // for its certificate files
	defer func() { assert.Equal(t, exitOK, s.stop()) }()
	for _, extra := range [][]string{nil, {"-tls-cert=" + filepath.Join(s.dir, "server.pem"), "-tls-key=" + filepath.Join(s.dir, "server-key.pem")}} {
		var errOut bytes.Buffer
		args := append([]string{"serve", "-listen=" + taken.Addr().String(), "-stats-every=0"}, extra...)
		code := run(context.Background(), args, nil, io.Discard, &errOut)
		assert.Equal(t, exitFailure, code, "%v", args)
		assert.Regexp(t, `^inflight serve: cannot listen on `+regexp.QuoteMeta(taken.Addr().String())+`: .*address already in use\n$`, errOut.String(), "%v", args)
	}
}

// TestServeMemStoreWarns: serve -store mem says once, in its log before
// it listens, that its records do not survive the process; a file store
// does not.
func TestServeMemStoreWarns(t *testing.T) {
	for _, store := range []string{"mem", "file:" + filepath.Join(t.TempDir(), "store")} {
		ctx, stop := context.WithCancel(context.Background())
		log := newWatchWriter()
		wait := runAsync(t, ctx, log, io.Discard, "serve", "-listen=127.0.0.1:0", "-store="+store, "-stats-every=0")
		log.wait(t, listeningLine, 10*time.Second)
		stop()
		require.Equal(t, exitOK, wait())
		before, _, _ := strings.Cut(log.String(), "msg=listening")
		warning := regexp.MustCompile(`(?m)^.*level=WARN .*lost when it exits.*$`)
		if store == "mem" {
			assert.Len(t, warning.FindAllString(log.String(), -1), 1, log.String())
			assert.Regexp(t, warning, before)
		} else {
			assert.NotRegexp(t, warning, log.String())
		}
	}
}
