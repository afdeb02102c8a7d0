package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/store/file"
	"github.com/inflightmq/inflight/transport/tcp"
	"github.com/inflightmq/inflight/wire"
)

// TestServeStoreLocked: a second serve on a store that one serve holds
// fails at start, saying so.
func TestServeStoreLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	out := newWatchWriter()
	wait := runAsync(t, ctx, out, io.Discard, "serve", "-listen=127.0.0.1:0", "-store=file:"+path, "-stats-every=0")
	out.wait(t, listeningLine, 10*time.Second)

	code, second, _ := runCmd(t, "serve", "-listen=127.0.0.1:0", "-store=file:"+path, "-stats-every=0")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, second, "level=ERROR")
	assert.Contains(t, second, "locked by another process")

	if !testing.Short() { // and from another process
		watchdog, cancel := context.WithTimeout(ctx, 30*time.Second) // killed if it serves
		defer cancel()
		cmd := exec.CommandContext(watchdog, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), serveEnv+"=-listen=127.0.0.1:0 -store=file:"+path+" -stats-every=0")
		out, err := cmd.Output()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit)
		assert.Equal(t, exitFailure, exit.ExitCode())
		assert.Contains(t, string(out), "locked by another process")
	}
	stop()
	assert.Equal(t, exitOK, wait())
}

// TestServeCorruptStore: serve refuses a corrupt store, saying where, and
// starts with -repair, saying where the damaged part went.
func TestServeCorruptStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	st, err := file.Open(path)
	require.NoError(t, err)
	for seq := uint64(1); seq <= 3; seq++ {
		require.NoError(t, st.Append("orders", "p", 0, []broker.Record{{Seq: seq, Payload: []byte("payload")}}))
	}
	require.NoError(t, st.Close())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	data[8+20] ^= 0x10 // inside the first entry
	require.NoError(t, os.WriteFile(path, data, 0o600))

	code, out, _ := runCmd(t, "serve", "-listen=127.0.0.1:0", "-store=file:"+path, "-stats-every=0")
	assert.Equal(t, exitFailure, code)
	assert.Regexp(t, `level=ERROR .*corrupt.* offset=8 bytes_after=\d+`, out)

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	log := newWatchWriter()
	wait := runAsync(t, ctx, log, io.Discard, "serve", "-listen=127.0.0.1:0", "-store=file:"+path, "-repair", "-stats-every=0", "-log-format=json")
	log.wait(t, regexp.MustCompile(`"msg":"listening"`), 10*time.Second)
	assert.Contains(t, log.String(), `"side_file":"`+path+`.corrupt-8"`)
	stop()
	assert.Equal(t, exitOK, wait())
	side, err := os.ReadFile(path + ".corrupt-8")
	require.NoError(t, err)
	assert.Equal(t, data[8:], side)
}

// TestServeVerify: damage in a sealed segment does not stop serve (it does
// not read sealed segments at start); with -verify it is found, named, and
// serve exits 1, the segment untouched.
func TestServeVerify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	st, err := file.Open(path, file.SegmentBytes(4096))
	require.NoError(t, err)
	payload := make([]byte, 1500)
	for seq := uint64(1); seq <= 10; seq++ {
		require.NoError(t, st.Append("orders", "p", 0, []broker.Record{{Seq: seq, Payload: payload}}))
	}
	require.NoError(t, st.Close())
	sealed := path + ".00000000000000000002"
	data, err := os.ReadFile(sealed)
	require.NoError(t, err)
	data[len(data)-10] ^= 0x01 // inside its last entry
	require.NoError(t, os.WriteFile(sealed, data, 0o600))

	ctx, stop := context.WithCancel(context.Background())
	log := newWatchWriter()
	wait := runAsync(t, ctx, log, io.Discard, "serve", "-listen=127.0.0.1:0", "-store=file:"+path, "-stats-every=0")
	log.wait(t, regexp.MustCompile(`msg=listening`), 10*time.Second)
	assert.Regexp(t, `sealed_segments=\d+`, log.String())
	stop()
	assert.Equal(t, exitOK, wait())

	code, out, _ := runCmd(t, "serve", "-listen=127.0.0.1:0", "-store=file:"+path, "-verify", "-stats-every=0")
	assert.Equal(t, exitFailure, code)
	assert.Regexp(t, `level=ERROR .*corrupt.* path=`+regexp.QuoteMeta(sealed)+` offset=\d+ bytes_after=\d+`, out)
	now, err := os.ReadFile(sealed)
	require.NoError(t, err)
	assert.Equal(t, data, now)
}

// failingStore fails every call with a failure for good once fail is set.
type failingStore struct {
	broker.Store
	fail atomic.Bool
}

func (s *failingStore) Append(topic, producer string, epoch uint64, recs []broker.Record) error {
	if s.fail.Load() {
		return fmt.Errorf("%w: append at offset 8: write store: %w", broker.ErrStoreFailed, syscall.ENOSPC)
	}
	return s.Store.Append(topic, producer, epoch, recs)
}

// TestServeExitsWhenStoreFails: when the store fails for good, the producer
// is told why, and serve logs the cause and exits 1.
func TestServeExitsWhenStoreFails(t *testing.T) {
	fs := &failingStore{}
	storeHook = func(s broker.Store) broker.Store { fs.Store = s; return fs }
	defer func() { storeHook = nil }()
	out := newWatchWriter()
	wait := runAsync(t, context.Background(), out, io.Discard, "serve", "-listen=127.0.0.1:0", "-stats-every=0")
	addr := out.wait(t, listeningLine, 10*time.Second)[1]

	d, err := tcp.NewDialer(addr)
	require.NoError(t, err)
	defer d.Close()
	remote := make(chan *wire.RemoteError, 16)
	p, err := core.New(d, core.SendTimeout(2*time.Second), core.ErrorHandler(func(err error) {
		if re := (*wire.RemoteError)(nil); errors.As(err, &re) {
			select {
			case remote <- re:
			default:
			}
		}
	}))
	require.NoError(t, err)
	defer p.Close(context.Background())
	_, err = p.Send(context.Background(), &core.Message{Payload: []byte("ok")})
	require.NoError(t, err)

	fs.fail.Store(true)
	_, err = p.Send(context.Background(), &core.Message{Payload: []byte("lost")})
	require.Error(t, err)
	select {
	case re := <-remote:
		assert.Equal(t, wire.CodeStoreUnavailable, re.Code)
		assert.Contains(t, re.Text, "no space left on device")
	case <-time.After(10 * time.Second):
		t.Fatal("the producer was not told")
	}
	assert.Equal(t, exitFailure, wait())
	assert.Regexp(t, `level=ERROR msg="store failed for good.*err=".*no space left on device`, out.String())
}
