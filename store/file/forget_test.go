package file_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/store/file"
	"github.com/inflightmq/inflight/transport/mem"
)

// TestEpochsNeverReused: a forgotten name's epoch is never given again,
// across restarts: the roll that forgets reserves an epoch above every one
// ever given (the floor, in the snapshot); the forgotten incarnation is
// below it and fenced, a new one gets an epoch above it; a pinned name (a
// live session) is never forgotten.
func TestEpochsNeverReused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	opts := []file.Option{file.SegmentBytes(testSegment), file.Fsync(file.FsyncNone),
		file.ForgetProducersAfter(time.Hour), file.WithNow(clock)}
	big := strings.Repeat("z", testSegment) // an Append that rolls
	state := func(s *file.Store, name string) broker.NameState {
		st, err := s.State(dflt, name)
		require.NoError(t, err)
		return st
	}

	s := openFileStore(t, path, opts...)
	require.NoError(t, s.Fence("a", 1))
	require.NoError(t, s.Append(dflt, "a", 1, seqRecs(1, recs("a1", "a2"))))
	require.NoError(t, s.Fence("live", 5))
	s.Pin("live")
	require.NoError(t, s.Fence("busy", 1))
	advance(2 * time.Hour)
	require.NoError(t, s.Append(dflt, "busy", 1, seqRecs(1, recs(big)))) // rolls: a forgotten
	floor := state(s, "a").Epoch
	assert.Greater(t, floor, uint64(5), "above every epoch ever given")
	assert.Equal(t, broker.NameState{Epoch: floor, Forgotten: true}, state(s, "a"))
	assert.Equal(t, uint64(5), state(s, "live").Epoch, "pinned: kept")
	require.NoError(t, s.Close())

	s = openFileStore(t, path, opts...)
	defer s.Close()
	assert.Equal(t, broker.NameState{Epoch: floor, Forgotten: true}, state(s, "a"), "the floor outlives a restart")
	assert.Equal(t, uint64(5), state(s, "live").Epoch, "a name kept below the floor keeps its epoch across a restart")
	assert.Equal(t, uint64(1), state(s, "busy").Epoch)
	require.ErrorIs(t, s.Fence("a", 1), broker.ErrFenced, "the forgotten incarnation")
	require.ErrorIs(t, s.Append(dflt, "a", 1, seqRecs(3, recs("a3"))), broker.ErrFenced)
	require.NoError(t, s.Fence("a", floor+1), "a new incarnation")
	require.NoError(t, s.Append(dflt, "a", floor+1, seqRecs(1, recs("new"))))
	assert.Equal(t, broker.NameState{LastSeq: 1, Epoch: floor + 1}, state(s, "a"))
	assert.GreaterOrEqual(t, state(s, "never-seen").Epoch, floor, "a new name starts above the floor too")
	require.NoError(t, s.Append(dflt, "busy", 1, seqRecs(2, recs("b2"))), "a kept incarnation goes on after a restart")
}

// TestForgottenProducerNeverDuplicates: the run of issue 30 item 1
// through a broker and a file store that forgets idle producers. A1 (name
// "dup") stores 5 records and stays connected, idle, while another
// producer rolls the store past ForgetProducersAfter: its live session
// keeps its name. Then the broker restarts, A1 is away, and a roll forgets
// "dup". Whether A1 or a new instance A2 comes back first, A1 is fenced
// (told that the store forgot it when it comes first), nothing of A1 is
// stored twice, and A2 starts afresh and goes on.
func TestForgottenProducerNeverDuplicates(t *testing.T) {
	for _, oldFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "forgotten instance first", false: "new instance first"}[oldFirst], func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store")
			var mu sync.Mutex
			now := time.Unix(1_800_000_000, 0)
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
			var st *file.Store
			var md *mem.Dialer
			up, down := restartable(t, &st, &md, path, file.SegmentBytes(testSegment), file.ForgetProducersAfter(time.Hour), file.WithNow(clock))
			opts := func(name string) []core.Option {
				return []core.Option{core.Name(name), core.SendTimeout(time.Minute),
					core.ReconnectBackoff(time.Millisecond, 10*time.Millisecond), core.ErrorHandler(func(error) {})}
			}
			send := func(p *core.Producer, what string) error {
				ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
				defer cancel()
				_, err := p.Send(ctx, &core.Message{Payload: []byte(what)})
				return err
			}
			roll := func() { // another producer fills a segment or two
				other, err := core.New(md, opts("other")...)
				require.NoError(t, err)
				for range 2 {
					require.NoError(t, send(other, strings.Repeat("o", testSegment)))
				}
				testkit.CloseProducer(t, other, time.Second)
			}

			up()
			sd := &switchDialer{d: md}
			a1, err := core.New(sd, opts("dup")...)
			require.NoError(t, err)
			defer testkit.CloseProducer(t, a1, time.Second)
			for i := range 5 {
				require.NoError(t, send(a1, fmt.Sprint("A1-", i)))
			}
			advance(2 * time.Hour)
			roll() // A1 idle on a live session: pinned, kept
			state, err := st.State(dflt, "dup")
			require.NoError(t, err)
			assert.Equal(t, broker.NameState{LastSeq: 5, Epoch: 1}, state, "a live session's name is not forgotten")

			down()
			a1Late := make(chan error, 1)
			go func() { a1Late <- send(a1, "A1-late") }()
			up()
			defer down()
			advance(2 * time.Hour)
			roll() // nobody holds "dup": forgotten
			state, err = st.State(dflt, "dup")
			require.NoError(t, err)
			require.True(t, state.Forgotten, "%+v", state)
			require.Greater(t, state.Epoch, uint64(1))

			var a2 *core.Producer
			startA2 := func() {
				a2, err = core.New(md, opts("dup")...)
				require.NoError(t, err)
				for i := range 5 {
					require.NoError(t, send(a2, fmt.Sprint("A2-", i)))
				}
			}
			if !oldFirst {
				startA2()
			}
			sd.set(md) // A1 reconnects
			select {
			case err := <-a1Late:
				require.ErrorIs(t, err, core.ErrFenced)
				assert.NotErrorIs(t, err, core.ErrRecordsLost)
				if oldFirst {
					assert.Contains(t, err.Error(), "the store forgot this name")
				}
				t.Logf("A1: %v", err)
			case <-time.After(waitTimeout):
				t.Fatal("A1's late message got no outcome")
			}
			require.ErrorIs(t, send(a1, "A1-after"), core.ErrFenced)
			if oldFirst {
				startA2()
			}
			require.NoError(t, send(a2, "A2-5"), "the new instance is not fenced")
			testkit.CloseProducer(t, a2, time.Second)

			count := map[string]int{}
			require.NoError(t, st.Scan(func(_, producer string, r broker.Record) error {
				if producer == "dup" {
					count[string(r.Payload)]++
				}
				return nil
			}))
			want := map[string]int{}
			for i := range 5 {
				want[fmt.Sprint("A1-", i)], want[fmt.Sprint("A2-", i)] = 1, 1
			}
			want["A2-5"] = 1
			assert.Equal(t, want, count, "each record of dup once; nothing of A1 after the forgetting")
			t.Logf("dup: %d records stored, each once; A1 fenced, A2 from seq 1", len(count))
		})
	}
}
