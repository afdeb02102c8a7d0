package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/store/natsjs/natsjstest"
)

// TestReadFollow: read -follow prints the records stored, then each new
// one as it is stored (across the file store's rolls), in order, once,
// until interrupted, which ends it with exit 0; with -n it ends by itself
// after that many. For a file store and for a NATS JetStream stream, each
// written by a serve that a producer sends to.
func TestReadFollow(t *testing.T) {
	for _, engine := range []string{"file", "nats"} {
		t.Run(engine, func(t *testing.T) {
			var store string
			serveArgs := []string{"serve", "-listen=127.0.0.1:0", "-stats-every=0"}
			if engine == "file" {
				store = "file:" + filepath.Join(t.TempDir(), "store")
				serveArgs = append(serveArgs, "-segment-bytes=4096") // a roll every few batches
			} else {
				c, err := natsjstest.Start(t.TempDir(), 1, natsjstest.Options{})
				require.NoError(t, err)
				defer c.Shutdown()
				store = "nats://" + strings.TrimPrefix(c.URLs(), "nats://") + "/FOLLOW?replicas=1"
			}
			serveCtx, stopServe := context.WithCancel(context.Background())
			log := newWatchWriter()
			serveDone := runAsync(t, serveCtx, log, log, append(serveArgs, "-store="+store)...)
			defer func() {
				stopServe()
				assert.Equal(t, exitOK, serveDone(), log.String())
			}()
			addr := log.wait(t, listeningLine, 30*time.Second)[1]
			payload := strings.Repeat("p", 300) // 4096 bytes hold a dozen
			produce := func(name string, n int) {
				t.Helper()
				code, out, errOut := runCmd(t, "produce", "-addr="+addr, "-topic=orders", "-name="+name, "-payload="+payload,
					fmt.Sprintf("-n=%d", n), "-progress=0")
				require.Equal(t, exitOK, code, "%s\n%s", out, errOut)
			}
			produce("before", 20) // stored before read starts
			produce("other", 1)   // another producer of the topic

			readCtx, interrupt := context.WithCancel(context.Background())
			defer interrupt()
			out, errOut := newWatchWriter(), newWatchWriter()
			readDone := runAsync(t, readCtx, out, errOut, "read", "-store="+store, "-topic=orders", "-follow")
			out.wait(t, regexp.MustCompile(`producer="before" seq=20 `), 30*time.Second)
			produce("after", 60)
			out.wait(t, regexp.MustCompile(`producer="after" seq=60 `), 30*time.Second)
			interrupt()
			require.Equal(t, exitOK, readDone(), "interrupted: the end of -follow; stderr: %s", errOut.String())
			var want []string
			for i := 1; i <= 20; i++ {
				want = append(want, fmt.Sprintf(`topic="orders" producer="before" seq=%d payload=%q`, i, payload))
			}
			want = append(want, fmt.Sprintf(`topic="orders" producer="other" seq=1 payload=%q`, payload))
			for i := 1; i <= 60; i++ {
				want = append(want, fmt.Sprintf(`topic="orders" producer="after" seq=%d payload=%q`, i, payload))
			}
			assert.Equal(t, want, strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"))
			assert.Empty(t, errOut.String())
			if engine == "file" {
				segs, err := filepath.Glob(strings.TrimPrefix(store, "file:") + ".*")
				require.NoError(t, err)
				assert.GreaterOrEqual(t, len(segs), 2, "read followed the store across rolls")
			}

			// -n ends it once that many were printed, new ones included.
			nCtx, cancel := context.WithCancel(context.Background())
			defer cancel()
			few := newWatchWriter()
			fewDone := runAsync(t, nCtx, few, io.Discard, "read", "-store="+store, "-topic=orders", "-producer=late", "-follow", "-n=3")
			produce("late", 5)
			assert.Equal(t, exitOK, fewDone())
			assert.Equal(t, 3, strings.Count(few.String(), "\n"), few.String())
		})
	}
	code, _, errOut := runCmd(t, "read", "-store=file:x", "-follow", "-list")
	assert.Equal(t, exitUsage, code, errOut)
	code, _, errOut = runCmd(t, "read", "-store=file:x", "-follow", "-skip-damaged")
	assert.Equal(t, exitUsage, code, errOut)
}
