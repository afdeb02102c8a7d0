package main

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
)

// recordingStore is, through storeHook, the store of a serve a test runs:
// it keeps a copy of every record it stored, and its Appends wait while
// gate (if not nil) is open.
type recordingStore struct {
	broker.Store
	gate     chan struct{} // Append waits until it is closed
	appended chan struct{} // closed at the first Append
	once     sync.Once

	mu   sync.Mutex
	recs map[[2]string][]broker.Record // by topic and producer
}

func newRecordingStore(gated bool) *recordingStore {
	s := &recordingStore{appended: make(chan struct{}), recs: map[[2]string][]broker.Record{}}
	if gated {
		s.gate = make(chan struct{})
	}
	return s
}

func (s *recordingStore) Append(topic, producer string, epoch uint64, recs []broker.Record) error {
	s.once.Do(func() { close(s.appended) })
	if s.gate != nil {
		<-s.gate
	}
	if err := s.Store.Append(topic, producer, epoch, recs); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range recs {
		r.Payload = append([]byte{}, r.Payload...)
		r.Key = nil
		r.Headers = nil
		k := [2]string{topic, producer}
		s.recs[k] = append(s.recs[k], r)
	}
	return nil
}

// stored returns the payloads stored for (topic, producer), checking that
// their sequence IDs are 1, 2, 3... (sequence IDs are per topic).
func (s *recordingStore) stored(t *testing.T, topic, producer string) []string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for i, r := range s.recs[[2]string{topic, producer}] {
		require.Equal(t, uint64(i+1), r.Seq, "topic %s, producer %s: sequence IDs are per topic", topic, producer)
		out = append(out, string(r.Payload))
	}
	return out
}

// serveWith runs serve (in this process, -store mem) with store s wrapped
// around its store; it returns the address and a function that opens the
// gate and stops it, which also runs at the test's cleanup if the test
// failed before calling it.
func serveWith(t *testing.T, s *recordingStore) (string, func()) {
	t.Helper()
	storeHook = func(st broker.Store) broker.Store { s.Store = st; return s }
	ctx, cancel := context.WithCancel(context.Background())
	log := newWatchWriter()
	wait := runAsync(t, ctx, log, io.Discard, "serve", "-listen=127.0.0.1:0", "-stats-every=0")
	stop := sync.OnceFunc(func() {
		if s.gate != nil {
			select {
			case <-s.gate:
			default:
				close(s.gate)
			}
		}
		cancel()
		assert.Equal(t, exitOK, wait())
		storeHook = nil
	})
	t.Cleanup(stop)
	addr := log.wait(t, listeningLine, 10*time.Second)[1]
	return addr, stop
}

var producerLine = regexp.MustCompile(`^producer ("[^"]+"), topic "([^"]+)", broker \S+\n`)

// TestProduceStdin: produce -input - sends one message per line of stdin
// (the line without "\n" or "\r\n"; an empty line is an empty message; the
// last line may lack its end), and exactly those are stored, in order, as
// the producer it names on its first line. The same from a file, and
// -payload; a line too long stops it with the line's number, after the
// lines before it were sent.
func TestProduceStdin(t *testing.T) {
	s := newRecordingStore(false)
	addr, stop := serveWith(t, s)
	defer stop()
	input := "first\nsecond line\n\nwith \"quotes\", é and a tab\t\r\nno end of line"
	want := []string{"first", "second line", "", "with \"quotes\", é and a tab\t", "no end of line"}

	code, out, errOut := runCmdInput(t, input, "produce", "-addr="+addr, "-input=-", "-topic=lines", "-progress=1h")
	require.Equal(t, exitOK, code, "%s\n%s", out, errOut)
	m := producerLine.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	name, err := strconv.Unquote(m[1])
	require.NoError(t, err)
	assert.Equal(t, "lines", m[2])
	assert.Contains(t, out, "5 acked, 0 failed")
	assert.Equal(t, want, s.stored(t, "lines", name))

	file := filepath.Join(t.TempDir(), "input")
	require.NoError(t, os.WriteFile(file, []byte(input+"\n"), 0o600))
	code, out, errOut = runCmd(t, "produce", "-addr="+addr, "-input="+file, "-topic=lines", "-name=from-file", "-progress=1h")
	require.Equal(t, exitOK, code, "%s\n%s", out, errOut)
	assert.True(t, strings.HasPrefix(out, `producer "from-file", topic "lines"`), out)
	assert.Equal(t, want, s.stored(t, "lines", "from-file"))

	code, out, errOut = runCmd(t, "produce", "-addr="+addr, "-payload={\"n\":1}", "-n=3", "-name=fixed", "-progress=1h")
	require.Equal(t, exitOK, code, "%s\n%s", out, errOut)
	assert.Equal(t, []string{`{"n":1}`, `{"n":1}`, `{"n":1}`}, s.stored(t, "default", "fixed"))
	code, out, errOut = runCmd(t, "produce", "-addr="+addr, "-payload=once", "-name=once", "-progress=1h")
	require.Equal(t, exitOK, code, "%s\n%s", out, errOut)
	assert.Equal(t, []string{"once"}, s.stored(t, "default", "once"), "-payload sends one message without -n")

	code, out, errOut = runCmdInput(t, "ok\n"+strings.Repeat("x", maxPayload+1)+"\nnever\n", "produce", "-addr="+addr, "-input=-", "-name=too-long", "-progress=1h")
	assert.Equal(t, exitFailure, code, out)
	assert.Equal(t, "inflight produce: -input: line 2: longer than the limit of 1048576 bytes\n", errOut)
	assert.Equal(t, []string{"ok"}, s.stored(t, "default", "too-long"))

	for _, args := range [][]string{
		{"-input=-", "-n=5"}, {"-input=-", "-size=20"}, {"-input=-", "-payload=x"}, {"-payload=x", "-size=20"},
		{"-input="}, {"-input=" + filepath.Join(t.TempDir(), "missing")}, {"-linger=-1s"}, {"-drain-timeout=0s"},
	} {
		code, _, errOut := runCmd(t, append([]string{"produce", "-addr=" + addr}, args...)...)
		assert.Equal(t, exitUsage, code, "%v: %s", args, errOut)
		assert.NotEmpty(t, errOut)
	}
}

var interruptedLine = regexp.MustCompile(`(?m)^interrupted after ([\d,]+) messages: ([\d,]+) acknowledged, ([\d,]+) failed, ([\d,]+) left(.*)$`)

// interruptedCounts returns the counts of produce's interrupted line:
// sent, acknowledged, failed, left.
func interruptedCounts(t *testing.T, out string) [4]uint64 {
	t.Helper()
	m := interruptedLine.FindStringSubmatch(out)
	require.NotNil(t, m, "no interrupted line in:\n%s", out)
	var c [4]uint64
	for i := range c {
		n, err := strconv.ParseUint(strings.ReplaceAll(m[i+1], ",", ""), 10, 64)
		require.NoError(t, err)
		c[i] = n
	}
	return c
}

// TestProduceInterruptDrains: an interrupt (the context main cancels on
// SIGINT) while messages are in flight, and while produce waits for room
// in a full queue, stops sending and drains: with the broker answering
// within -drain-timeout, every message sent is acknowledged and stored;
// with the broker stuck, those in flight are left, not failed. Either way
// the summary says interrupted, its counts add up, and no message fails
// with "context canceled" because of the interrupt.
func TestProduceInterruptDrains(t *testing.T) {
	for _, stuck := range []bool{false, true} {
		s := newRecordingStore(true)
		addr, stop := serveWith(t, s)
		ctx, cancel := context.WithCancel(context.Background())
		out := newWatchWriter()
		name := "drained"
		drain := "30s"
		if stuck {
			name, drain = "stuck", "300ms"
		}
		wait := runAsync(t, ctx, out, out, "produce", "-addr="+addr, "-n=1000000", "-name="+name,
			"-timeout=30s", "-drain-timeout="+drain, "-progress=1h")
		select {
		case <-s.appended: // the broker holds a batch: messages are in flight, the queue fills
		case <-time.After(10 * time.Second):
			t.Fatal("nothing reached the store")
		}
		cancel()
		out.wait(t, regexp.MustCompile(`interrupted: sending stopped`), 30*time.Second)
		if !stuck {
			close(s.gate)
		}
		code := wait()
		stop()
		assert.Equal(t, exitFailure, code, "an interrupted run exits 1")
		t.Log(interruptedLine.FindString(out.String()))
		c := interruptedCounts(t, out.String())
		sent, acked, failed, left := c[0], c[1], c[2], c[3]
		assert.Positive(t, sent)
		assert.Equal(t, sent, acked+failed+left, "the counts add up")
		assert.Zero(t, failed)
		assert.NotContains(t, out.String(), "context canceled")
		if stuck {
			assert.Zero(t, acked)
			assert.Equal(t, sent, left)
			assert.Contains(t, out.String(), "not acknowledged within -drain-timeout 300ms")
		} else {
			assert.Equal(t, sent, acked)
			assert.Zero(t, left)
			assert.Len(t, s.stored(t, "default", name), int(acked), "stored exactly once each")
		}
	}
}

// progressLine is produce's progress line.
var progressLine = regexp.MustCompile(`(?m)^ *[\d.]+s  acked [\d,]+ `)

// TestProduceProgressZeroIsOff: -progress 0 prints no progress line (as
// serve -stats-every 0 prints no stats line), and the summary still ends
// the run; a short interval prints them, and a negative one is refused.
func TestProduceProgressZeroIsOff(t *testing.T) {
	s := newRecordingStore(false)
	addr, stop := serveWith(t, s)
	defer stop()
	code, out, errOut := runCmd(t, "produce", "-addr="+addr, "-n=100", "-rate=400", "-name=quiet", "-progress=0")
	require.Equal(t, exitOK, code, "%s\n%s", out, errOut)
	assert.NotRegexp(t, progressLine, out)
	assert.Contains(t, out, "100 acked, 0 failed")
	assert.Len(t, s.stored(t, "default", "quiet"), 100)

	code, out, errOut = runCmd(t, "produce", "-addr="+addr, "-n=100", "-rate=400", "-name=chatty", "-progress=20ms")
	require.Equal(t, exitOK, code, "%s\n%s", out, errOut)
	assert.Regexp(t, progressLine, out, "the pattern matches the progress line")

	code, _, errOut = runCmd(t, "produce", "-addr="+addr, "-progress=-1s")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "-progress must not be negative")
}

// TestProduceSecondInterruptStops: a second interrupt (the context main
// cancels on the second SIGINT or SIGTERM) ends the drain at once, though
// -drain-timeout is an hour; the first interrupt's note says so, and the
// summary counts what was left as unknown, stopped by the second interrupt.
func TestProduceSecondInterruptStops(t *testing.T) {
	s := newRecordingStore(true) // stuck: nothing is acknowledged
	addr, stop := serveWith(t, s)
	defer stop()
	first, interrupt := context.WithCancel(context.Background())
	second, interruptAgain := context.WithCancel(context.Background())
	defer interruptAgain()
	out := newWatchWriter()
	wait := runAsync(t, withSecondInterrupt(first, second), out, out, "produce", "-addr="+addr, "-n=1000000",
		"-name=impatient", "-timeout=1h", "-drain-timeout=1h", "-progress=0")
	select {
	case <-s.appended:
	case <-time.After(10 * time.Second):
		t.Fatal("nothing reached the store")
	}
	interrupt()
	out.wait(t, regexp.MustCompile(`interrupted: sending stopped; waiting up to 1h0m0s \(-drain-timeout\) for the [\d,]+ messages pending; interrupt again to stop now`), 10*time.Second)
	interruptAgain()
	code := wait() // bounded: it fails the test after 30s, the drain would take an hour
	assert.Equal(t, exitFailure, code)
	c := interruptedCounts(t, out.String())
	assert.Positive(t, c[3], "left")
	assert.Equal(t, c[0], c[1]+c[2]+c[3], "the counts add up")
	assert.Contains(t, out.String(), "not acknowledged before the second interrupt")
}

// TestProduceInterruptNeverSentSaysSo: interrupted while the broker is
// unreachable, produce never wrote a message to a connection: the summary
// says they were never sent, so not stored, not "stored or not, unknown".
func TestProduceInterruptNeverSentSaysSo(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	out := newWatchWriter()
	wait := runAsync(t, ctx, out, out, "produce", "-addr="+addr, "-n=1000", "-name=unheard",
		"-timeout=1h", "-drain-timeout=200ms", "-progress=10ms")
	out.wait(t, regexp.MustCompile(`connection: .*refused`), 10*time.Second)
	out.wait(t, regexp.MustCompile(`pending 1,000 `), 10*time.Second) // every message queued
	interrupt()
	assert.Equal(t, exitFailure, wait())
	c := interruptedCounts(t, out.String())
	assert.Equal(t, uint64(1000), c[0])
	assert.Equal(t, [3]uint64{0, 0, c[0]}, [3]uint64{c[1], c[2], c[3]}, "every message left")
	assert.Contains(t, out.String(), "left (never sent: no connection took them, so none was stored)")
	assert.NotContains(t, out.String(), "unknown")
}
