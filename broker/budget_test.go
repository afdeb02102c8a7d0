package broker_test

import (
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/wire"
)

// gatedStore is a MemoryStore that records the size of each Append and,
// while its gate is shut, holds every Append until it opens.
type gatedStore struct {
	*broker.MemoryStore
	mu      sync.Mutex
	gate    chan struct{} // nil: open
	appends []int
	entered chan struct{} // one per Append held at the gate
}

func newGatedStore() *gatedStore {
	return &gatedStore{MemoryStore: broker.NewMemoryStore(), entered: make(chan struct{}, 64)}
}

func (g *gatedStore) shut() {
	g.mu.Lock()
	g.gate = make(chan struct{})
	g.mu.Unlock()
}

func (g *gatedStore) open() {
	g.mu.Lock()
	if g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
	g.mu.Unlock()
}

func (g *gatedStore) Append(topic, producer string, epoch uint64, recs []broker.Record) error {
	g.mu.Lock()
	gate := g.gate
	g.appends = append(g.appends, len(recs))
	g.mu.Unlock()
	if gate != nil {
		g.entered <- struct{}{}
		<-gate
	}
	return g.MemoryStore.Append(topic, producer, epoch, recs)
}

func (g *gatedStore) sizes() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int(nil), g.appends...)
}

// tinyBatch is a BATCH of n records with empty payloads (2 bytes each): the
// most records a frame's bytes can carry.
func tinyBatch(first uint64, n int) []byte {
	var bb wire.BatchBuilder
	bb.Reset(nil, 0, first)
	for range n {
		bb.Add(nil)
	}
	return bb.Finish()
}

// TestAppendChunks: a frame of more records than one Append may index
// (tens of thousands of tiny records, or records with many headers) is
// stored with several Appends, every record once and in order, and
// acknowledged with one RECEIPT; the frame memory is all given back.
func TestAppendChunks(t *testing.T) {
	perAppend := broker.MaxAppendIndex / int(unsafe.Sizeof(broker.Record{}))
	hs := make([]wire.Header, wire.MaxHeaders)
	for i := range hs {
		hs[i] = wire.Header{Key: string(rune('a' + i%26)), Value: nil}
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		n     int
	}{
		{"tiny records", tinyBatch(1, 3*perAppend+7), 3*perAppend + 7},
		{"many headers", func() []byte {
			var bb wire.BatchBuilder
			bb.Reset(nil, 0, 1)
			for range 5000 {
				bb.AddRecord([]byte("p"), nil, hs, time.Time{})
			}
			return bb.Finish()
		}(), 5000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newGatedStore()
			b, err := broker.New(store)
			require.NoError(t, err)
			c := newConn(t, b)
			c.hello(t, "p")
			reply, err := c.handle(t, tc.frame)
			require.NoError(t, err)
			assert.Equal(t, uint64(tc.n), receipt(t, reply))
			recs := store.Records("p")
			require.Len(t, recs, tc.n)
			for i, r := range recs {
				if r.Seq != uint64(i+1) {
					require.Equal(t, uint64(i+1), r.Seq)
				}
			}
			sizes := store.sizes()
			assert.GreaterOrEqual(t, len(sizes), 3, "Appends of %v records", sizes)
			if tc.name == "many headers" {
				assert.Len(t, recs[tc.n-1].Headers, wire.MaxHeaders)
			}
			st := testkit.StatsAfter(t, b, 1)
			assert.Equal(t, uint64(tc.n), st.Stored)
			assert.Equal(t, uint64(1), st.Batches)
			assert.Zero(t, st.BufferedBytes, "the frame memory given back")
		})
	}
}

// TestFrameMemoryBudget: the frame memory of all sessions is one budget
// (MaxBufferedBytes). While one session's frame waits for its Append, the
// next session's frame does not fit: it waits, and is stored once the first
// Append gave the memory back; if that takes too long, it is refused with
// ErrBusy (ERROR internal), and its session alone ends.
func TestFrameMemoryBudget(t *testing.T) {
	defer broker.SetBudgetWait(broker.SetBudgetWait(300 * time.Millisecond))
	const maxFrame = 64 << 10
	// One frame of 30000 records: its index takes most of the budget.
	frame := tinyBatch(1, 30000)
	require.Less(t, len(frame), maxFrame)
	least := maxFrame + broker.MaxAppendIndex + 1024
	_, err := broker.New(broker.NewMemoryStore(), broker.MaxFrameSize(maxFrame), broker.MaxBufferedBytes(least-2048))
	require.ErrorIs(t, err, broker.ErrInvalidOption, "a budget without room for the largest frame")

	store := newGatedStore()
	b, err := broker.New(store, broker.MaxFrameSize(maxFrame), broker.MaxBufferedBytes(least))
	require.NoError(t, err)
	a, c := newConn(t, b), newConn(t, b)
	// Cleanups run last first: the gate opens before the sessions close, so
	// a failed check never leaves a session's Close waiting on a held Append.
	t.Cleanup(store.open)
	a.hello(t, "a")
	c.hello(t, "c")

	t.Run("waits", func(t *testing.T) {
		// Long enough for this test to open the gate on a loaded machine;
		// c's frame is stored as soon as it does.
		defer broker.SetBudgetWait(broker.SetBudgetWait(time.Minute))
		store.shut()
		require.NoError(t, a.Handle(frame))
		testkit.WaitChan(t, store.entered, "an Append held at the gate") // a's Append holds its charge
		done := make(chan error, 1)
		go func() { done <- c.Handle(frame) }()
		waitUntil(t, "c's frame waiting", func() bool { return b.Stats().BufferWaits == 1 })
		store.open()
		require.NoError(t, testkit.WaitChan(t, done, "c's frame, after a's Append returned"))
		c.peer.waitSent(t, 1)
		a.peer.waitSent(t, 1)
		assert.Equal(t, uint64(30000), receipt(t, a.peer.take()[0]))
		assert.Equal(t, uint64(30000), receipt(t, c.peer.take()[0]))
	})

	t.Run("refused after waiting too long", func(t *testing.T) {
		store.shut()
		defer store.open()
		require.NoError(t, a.Handle(tinyBatch(30001, 30000)))
		testkit.WaitChan(t, store.entered, "an Append held at the gate")
		reply, err := c.handle(t, tinyBatch(30001, 30000))
		require.ErrorIs(t, err, broker.ErrBusy)
		e := errorFrame(t, reply)
		assert.Equal(t, wire.CodeInternal, e.Code)
		assert.Contains(t, e.Text, "MaxBufferedBytes")
		store.open()
		a.peer.waitSent(t, 1)
		assert.Equal(t, uint64(60000), receipt(t, a.peer.take()[0]), "the other session is unaffected")
		assert.Len(t, store.Records("c"), 30000)
	})

	st := b.Stats()
	assert.Equal(t, uint64(2), st.BufferWaits)
	assert.Equal(t, uint64(1), st.Busy)
	waitUntil(t, "the frame memory given back", func() bool { return b.Stats().BufferedBytes == 0 })
}

// frameStore is a gatedStore that records, per Append, which records
// start a producer frame (broker.Record.FrameStart).
type frameStore struct {
	*gatedStore
	mu     sync.Mutex
	starts [][]bool
}

func (f *frameStore) Append(topic, producer string, epoch uint64, recs []broker.Record) error {
	flags := make([]bool, len(recs))
	for i, r := range recs {
		flags[i] = r.FrameStart
	}
	f.mu.Lock()
	f.starts = append(f.starts, flags)
	f.mu.Unlock()
	return f.gatedStore.Append(topic, producer, epoch, recs)
}

// TestFrameStartMarksEachFrame: frames that queued while an Append was
// held go to the Store in one Append, the first record of each marked
// FrameStart, so that a store can checksum them apart.
func TestFrameStartMarksEachFrame(t *testing.T) {
	store := &frameStore{gatedStore: newGatedStore()}
	b, err := broker.New(store)
	require.NoError(t, err)
	c := newConn(t, b)
	c.hello(t, "p")
	store.shut()
	require.NoError(t, c.Handle(batchFrame(0, 1, 2)))
	testkit.WaitChan(t, store.entered, "an Append held at the gate")
	require.NoError(t, c.Handle(batchFrame(0, 3, 3)))
	require.NoError(t, c.Handle(batchFrame(0, 6, 1)))
	store.open()
	waitUntil(t, "every record stored", func() bool { return store.Len("p") == 6 })
	store.mu.Lock()
	defer store.mu.Unlock()
	assert.Equal(t, [][]bool{{true, false}, {true, false, false, true}}, store.starts)
}
