package broker_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/wire"
)

// takerStore is a MemoryStore that takes frames (broker.FrameAppender): it
// reads their records as a store of its own format would, and notes every
// call of either kind.
type takerStore struct {
	*broker.MemoryStore
	mu      sync.Mutex
	calls   []string      // "append 4-7", "frames 1-5,6-6"
	hold    chan struct{} // if set, AppendFrames waits until it is closed
	entered chan struct{} // if set, told when an AppendFrames begins
}

func (s *takerStore) note(call string) {
	s.mu.Lock()
	s.calls = append(s.calls, call)
	s.mu.Unlock()
}

func (s *takerStore) taken() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

func (s *takerStore) Append(topic, producer string, epoch uint64, recs []broker.Record) error {
	s.note(fmt.Sprintf("append %d-%d", recs[0].Seq, recs[len(recs)-1].Seq))
	return s.MemoryStore.Append(topic, producer, epoch, recs)
}

func (s *takerStore) AppendFrames(topic, producer string, epoch uint64, frames []broker.Frame) error {
	if s.entered != nil {
		s.entered <- struct{}{}
	}
	if s.hold != nil {
		<-s.hold
	}
	call := "frames"
	var recs []broker.Record
	for i, f := range frames {
		call += fmt.Sprintf("%c%d-%d", " ,"[min(i, 1)], f.FirstSeq, f.FirstSeq+uint64(f.Count)-1)
		it := wire.NewRecordIter(f.Records, uint32(f.Count))
		for j, raw := 0, []byte(nil); ; j++ {
			var ok bool
			if raw, ok = it.Next(); !ok {
				break
			}
			var rr wire.RecordReader // a reader per record: Headers are views into its memory
			r, err := rr.Read(raw)
			if err != nil {
				return err
			}
			recs = append(recs, broker.Record{Seq: f.FirstSeq + uint64(j), Payload: r.Payload,
				Key: r.Key, Headers: r.Headers, EventTime: r.EventTime, Raw: raw, FrameStart: j == 0})
		}
		if err := it.Err(); err != nil {
			return err
		}
	}
	s.note(call)
	return s.MemoryStore.Append(topic, producer, epoch, recs)
}

// serveTaker starts a broker over store and a session of producer "p" on
// it, past its HELLO.
func serveTaker(t *testing.T, store *takerStore) (*broker.Broker, conn) {
	t.Helper()
	b, err := broker.New(store)
	require.NoError(t, err)
	c := newConn(t, b)
	c.hello(t, "p")
	return b, c
}

// firstSent is records 1..last as the store must hold them: payloads of
// generation 1 up to gen1Last, of generation 2 after it.
func firstSent(last, gen1Last uint64) []broker.Record {
	var want []broker.Record
	for seq := uint64(1); seq <= last; seq++ {
		gen := 1
		if seq > gen1Last {
			gen = 2
		}
		want = append(want, broker.Record{Seq: seq, Payload: payload(gen, seq)})
	}
	return want
}

// TestFrameAppenderTakesFrames: a Store that takes frames gets a producer's
// new frames as they came, metadata and all, never Append; of a resend that
// begins with records stored before, only the records after them, stored
// once each; a frame of records all stored before reaches it not at all.
func TestFrameAppenderTakesFrames(t *testing.T) {
	store := &takerStore{MemoryStore: broker.NewMemoryStore()}
	b, c := serveTaker(t, store)
	require.Equal(t, uint64(5), c.send(t, 1, 1, 5))
	assert.Equal(t, []string{"frames 1-5"}, store.taken())

	require.Equal(t, uint64(8), c.send(t, 2, 4, 5)) // 4..8: 4 and 5 stored before
	assert.Equal(t, []string{"frames 1-5", "frames 6-8"}, store.taken())
	require.Equal(t, uint64(8), c.send(t, 3, 2, 3)) // 2..4: all stored before
	assert.Equal(t, []string{"frames 1-5", "frames 6-8"}, store.taken())

	want := firstSent(8, 5) // 1..5 of generation 1, 6..8 of 2
	meta := testkit.MetaRecords()
	var bb wire.BatchBuilder
	bb.Reset(nil, 0, 9)
	for i, r := range meta {
		bb.AddRecord(r.Payload, r.Key, r.Headers, r.EventTime)
		r.Seq = 9 + uint64(i)
		want = append(want, r)
	}
	reply, err := c.handle(t, bb.Finish())
	require.NoError(t, err)
	require.Equal(t, uint64(8+len(meta)), receipt(t, reply))
	require.Len(t, store.taken(), 3)
	assert.Equal(t, fmt.Sprintf("frames 9-%d", 8+len(meta)), store.taken()[2])
	testkit.RequireSameRecords(t, want, store.Records("p"))
	st := testkit.StatsAfter(t, b, 4)
	assert.Equal(t, uint64(5+3+len(meta)), st.Stored)
	assert.Equal(t, uint64(2+3), st.Duplicates)
}

// TestFrameAppenderFailure: an AppendFrames that fails is a failed Append:
// a Store error ends the topic with a TOPIC_ERROR and nothing is
// acknowledged; an error wrapping ErrFenced fences the session.
func TestFrameAppenderFailure(t *testing.T) {
	store := &takerStore{MemoryStore: broker.NewMemoryStore()}
	_, c := serveTaker(t, store)
	require.Equal(t, uint64(3), c.send(t, 0, 1, 3))

	store.FailAppends(errors.New("disk full"))
	reply, err := c.handle(t, batchFrame(1, 4, 2))
	require.NoError(t, err)
	e, err := wire.DecodeTopicError(reply)
	require.NoError(t, err, "want TOPIC_ERROR, got %s", testkit.DescribeFrame(reply))
	assert.Equal(t, wire.CodeStore, e.Code)
	assert.Contains(t, e.Text, "disk full")
	assert.Equal(t, seqRange(1, 3), seqs(store.MemoryStore, "p"))

	store.FailAppends(fmt.Errorf("%w: a newer epoch holds the name", broker.ErrFenced))
	require.Equal(t, uint64(3), c.topic(t, 0, dflt))
	reply, err = c.handle(t, batchFrame(1, 4, 2))
	require.NoError(t, err)
	assert.Equal(t, wire.CodeFenced, errorFrame(t, reply).Code)
	waitUntil(t, "the fenced session's peer closed", c.peer.closed)
	assert.Equal(t, seqRange(1, 3), seqs(store.MemoryStore, "p"))
	assert.Equal(t, []string{"frames 1-3", "frames 4-5", "frames 4-5"}, store.taken())
}

// TestFrameAppenderTakesQueuedFrames: frames that queue while an
// AppendFrames runs go to the next one together: a new frame, a resend
// whose first records were queued before (only the rest is handed over)
// and a frame of records all stored or queued (none of it is); every
// record is stored once, as first sent.
func TestFrameAppenderTakesQueuedFrames(t *testing.T) {
	store := &takerStore{MemoryStore: broker.NewMemoryStore(), hold: make(chan struct{}), entered: make(chan struct{}, 8)}
	var release sync.Once
	open := func() { release.Do(func() { close(store.hold) }) }
	b, c := serveTaker(t, store)
	// A failed test must not leave the appender waiting: cleanups run
	// last first, so this runs before the session's Close waits for it.
	t.Cleanup(open)

	require.NoError(t, c.Handle(batchFrame(1, 1, 5)))
	select {
	case <-store.entered: // 1..5 are being stored
	case <-time.After(10 * time.Second):
		t.Fatal("no AppendFrames")
	}
	require.NoError(t, c.Handle(batchFrame(1, 6, 3))) // 6..8
	require.NoError(t, c.Handle(batchFrame(2, 7, 4))) // 7..10: 7 and 8 queued
	require.NoError(t, c.Handle(batchFrame(3, 2, 3))) // 2..4: stored meanwhile
	open()
	waitUntil(t, "the second AppendFrames", func() bool { return len(store.taken()) == 2 })
	assert.Equal(t, []string{"frames 1-5", "frames 6-8,9-10"}, store.taken())

	want := firstSent(10, 8) // 1..8 of generation 1, 9..10 of 2
	testkit.RequireSameRecords(t, want, store.Records("p"))
	st := testkit.StatsAfter(t, b, 4)
	assert.Equal(t, uint64(10), st.Stored)
	assert.Equal(t, uint64(2+3), st.Duplicates)
}
