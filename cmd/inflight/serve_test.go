package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/store/file"
	"github.com/inflightmq/inflight/transport/tcp"
)

const serveEnv = "INFLIGHT_TEST_SERVE_ARGS"

// listeningLine is serve's log line that says where it listens.
var listeningLine = regexp.MustCompile(`msg=listening addr=(\S+)`)

// serveChild runs `inflight serve` when the test binary is re-executed as a
// broker process; it reports whether it did (and then exits).
func serveChild() bool {
	args, ok := os.LookupEnv(serveEnv)
	if !ok {
		return false
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, append([]string{"serve"}, strings.Fields(args)...), os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
	return true
}

// startServe starts a broker process and returns it with its address.
func startServe(t *testing.T, args string) (*exec.Cmd, string) {
	t.Helper()
	cmd, addr, _ := startServeLogged(t, args)
	return cmd, addr
}

// startServeLogged is startServe that also returns the process's log (its
// standard output) as it comes.
func startServeLogged(t *testing.T, args string) (*exec.Cmd, string, *watchWriter) {
	t.Helper()
	log := newWatchWriter()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serveEnv+"="+args)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		_, _ = fmt.Fprintln(log, lines.Text())
		if m := listeningLine.FindStringSubmatch(lines.Text()); m != nil {
			addr := m[1]
			go func() { // keep draining so the child never blocks on stdout
				for lines.Scan() {
					_, _ = fmt.Fprintln(log, lines.Text())
				}
			}()
			return cmd, addr, log
		}
	}
	t.Fatalf("broker process exited before listening: %v", lines.Err())
	return nil, "", nil
}

// TestServeSurvivesKill9: a file-backed broker is killed with SIGKILL while
// records are being written, and restarted on the same file and address;
// the producer resends what was not acknowledged. Every acknowledged record
// is in the file exactly once, nothing is stored twice, and the order holds.
func TestServeSurvivesKill9(t *testing.T) {
	serveKill9(t, "", 1)
}

// TestServeKill9WithSegments: the same with the smallest segments (4 KiB:
// most batches of the producer get a segment of their own, so the store
// rolls all the time) and three kills: a kill may land in the middle of a
// roll.
func TestServeKill9WithSegments(t *testing.T) {
	path := serveKill9(t, " -segment-bytes=4096", 3, core.MaxBatchMessages(100))
	sealed, err := filepath.Glob(path + ".????????????????????")
	require.NoError(t, err)
	assert.Greater(t, len(sealed), 50, "the store rolled")
}

// serveKill9 runs the kill -9 scenario with serve's extra flags, killing
// the broker kills times while 20,000 messages are sent by a producer with
// opts, and returns the store's path.
func serveKill9(t *testing.T, extra string, kills int, opts ...core.Option) string {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	path := filepath.Join(t.TempDir(), "store.log")
	args := "-store=file:" + path + " -fsync=batch -stats-every=0" + extra
	cmd, addr := startServe(t, "-listen=127.0.0.1:0 "+args)
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	d, err := tcp.NewDialer(addr)
	require.NoError(t, err)
	defer d.Close()
	p, err := core.New(d, append([]core.Option{core.Name("kill9"), core.SendTimeout(time.Minute),
		core.ReconnectBackoff(5*time.Millisecond, 50*time.Millisecond)}, opts...)...)
	require.NoError(t, err)

	const n = 20000
	var mu sync.Mutex
	acked := map[uint64]uint64{} // seq -> message index
	var failures []error
	var wg sync.WaitGroup
	killAt := make(chan struct{}, kills) // one per kill, at n/(kills+1) acknowledgements apart
	for i := range n {
		wg.Add(1)
		payload := binary.BigEndian.AppendUint64(make([]byte, 0, 64), uint64(i))
		require.NoError(t, p.SendAsync(context.Background(), &core.Message{Payload: payload[:64]}, func(id core.MessageID, _ *core.Message, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failures = append(failures, err)
				return
			}
			acked[uint64(id)] = uint64(i)
			if len(acked)%(n/(kills+1)) == 0 && len(acked) < n {
				killAt <- struct{}{}
			}
		}))
	}
	for range kills {
		select {
		case <-killAt:
		case <-time.After(time.Minute):
			t.Fatal("no progress: the broker never acknowledged enough to be killed")
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		cmd, _ = startServe(t, "-listen="+addr+" "+args)
	}
	wg.Wait()
	require.NoError(t, p.Close(context.Background()))
	require.Empty(t, failures)
	require.Len(t, acked, n)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "graceful shutdown exits 0")

	fst, err := file.Open(path)
	require.NoError(t, err)
	defer fst.Close()
	require.NoError(t, fst.Verify())
	seen := map[uint64]bool{}
	lastIdx := int64(-1)
	require.NoError(t, fst.Scan(func(_, producer string, rec broker.Record) error {
		seq, payload := rec.Seq, rec.Payload
		assert.Equal(t, "kill9", producer)
		require.False(t, seen[seq], "seq %d stored twice", seq)
		seen[seq] = true
		idx := int64(binary.BigEndian.Uint64(payload))
		require.Greater(t, idx, lastIdx, "stored out of order")
		lastIdx = idx
		if want, ok := acked[seq]; ok {
			require.Equal(t, want, uint64(idx), "seq %d holds another message", seq)
		}
		return nil
	}))
	for seq := range acked {
		require.True(t, seen[seq], "acknowledged seq %d lost", seq)
	}
	t.Logf("%d records stored, %d acknowledged, %d kills", len(seen), len(acked), kills)
	return path
}
