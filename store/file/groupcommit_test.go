package file_test

import (
	"context"
	"fmt"
	"path/filepath"
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

// TestGroupCommitSharesFsync: concurrent producers on a disk whose fsync
// takes 2 ms. Every frame that arrives while a commit runs, on one
// connection and across connections, goes into the next commit: far fewer
// fsyncs than frames, one write per commit, and every record stored once,
// in order.
func TestGroupCommitSharesFsync(t *testing.T) {
	counts := &file.FileCounts{SyncDelay: 2 * time.Millisecond}
	s := openFileStore(t, filepath.Join(t.TempDir(), "store"), file.Fsync(file.FsyncBatch), file.WithCounts(counts))
	defer s.Close()
	b, err := broker.New(s)
	require.NoError(t, err)
	d := mem.NewDialer(b)

	const producers, msgs = 8, 400
	var wg sync.WaitGroup
	ps := make([]*core.Producer, producers)
	for i := range producers {
		p, _ := testkit.NewProducer(t, d, d.Close, fmt.Sprint("p", i), core.SendTimeout(time.Minute))
		ps[i] = p
		wg.Go(func() {
			done := make(chan error, msgs)
			for k := range msgs {
				// Paced a little, so that frames stay small and many.
				if k%20 == 0 {
					time.Sleep(time.Millisecond)
				}
				if err := p.SendAsync(context.Background(), &core.Message{Payload: fmt.Appendf(nil, "%d", k)},
					func(_ core.MessageID, _ *core.Message, err error) { done <- err }); err != nil {
					done <- err
				}
			}
			for range msgs {
				assert.NoError(t, <-done)
			}
		})
	}
	wg.Wait()

	// The broker counts a frame just after it handed the frame's receipt
	// on: wait for every frame the producers wrote (none twice: no
	// reconnects over mem) rather than read the count once.
	var written uint64
	for _, p := range ps {
		pst := p.Stats()
		require.Zero(t, pst.Reconnects)
		written += pst.Batches
	}
	batches := testkit.StatsAfter(t, b, written).Batches
	assert.Equal(t, written, batches, "every frame written counted once")
	writes, syncs := counts.Counts()
	st := s.Stats()
	t.Logf("%d frames, %d Appends, %d writes, %d fsyncs: %.1f records per fsync",
		batches, st.Appends, writes, syncs, float64(st.Records)/float64(syncs))
	assert.Less(t, uint64(syncs)*2, batches, "fsyncs shared by the frames of a commit")
	assert.LessOrEqual(t, st.Appends, batches, "one Append per frame at most")
	assert.Equal(t, writes, syncs, "one write per commit (nothing rolled)")
	assert.LessOrEqual(t, st.Syncs, uint64(syncs), "the store counts its commits (Open fsyncs too)")
	for i := range producers {
		name := fmt.Sprint("p", i)
		var got []string
		require.NoError(t, s.Scan(func(_, producer string, r broker.Record) error {
			if producer == name {
				got = append(got, string(r.Payload))
			}
			return nil
		}))
		require.Len(t, got, msgs, name)
		for k, pl := range got {
			require.Equal(t, fmt.Sprint(k), pl, "%s record %d", name, k)
		}
	}
}

// TestGroupCommitConcurrentAppends: Appends of different producers that
// wait for one commit share its write and its fsync.
func TestGroupCommitConcurrentAppends(t *testing.T) {
	counts := &file.FileCounts{SyncDelay: 2 * time.Millisecond}
	s := openFileStore(t, filepath.Join(t.TempDir(), "store"), file.Fsync(file.FsyncBatch), file.WithCounts(counts))
	defer s.Close()
	const producers, appends = 16, 20
	var wg sync.WaitGroup
	for i := range producers {
		wg.Go(func() {
			for k := range appends {
				assert.NoError(t, s.Append(dflt, fmt.Sprint("p", i), 0, seqRecs(uint64(k+1), recs("x"))))
			}
		})
	}
	wg.Wait()
	writes, syncs := counts.Counts()
	t.Logf("%d Appends, %d writes, %d fsyncs", producers*appends, writes, syncs)
	assert.Less(t, syncs, producers*appends/2)
	assert.Equal(t, writes, syncs)
	for i := range producers {
		last, err := lastSeq(s, dflt, fmt.Sprint("p", i))
		require.NoError(t, err)
		assert.Equal(t, uint64(appends), last)
	}
}
