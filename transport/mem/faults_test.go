package mem_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/transport/mem"
	"github.com/inflightmq/inflight/wire"
)

func TestFaults(t *testing.T) {
	t.Run("RefuseDials", func(t *testing.T) {
		e := newEnv(t)
		open, openRec := e.dial(t)
		handshake(t, open, openRec, "open")

		e.d.RefuseDials(true)
		for range 3 {
			c, err := e.d.Dial(context.Background(), newRecorder())
			require.ErrorIs(t, err, mem.ErrRefused)
			assert.Nil(t, c)
		}
		assert.Equal(t, 1, e.d.Dials(), "refused dials are not counted")
		assert.Equal(t, 1, e.d.Conns())

		// Open connections are not affected.
		write(t, open, pingFrame(9))
		assert.Equal(t, uint64(9), pong(t, openRec.waitFrames(t, 3)[2]))

		e.d.RefuseDials(false)
		c, r := e.dial(t)
		assert.Zero(t, handshake(t, c, r, "p").LastSeq)
		assert.Equal(t, 2, e.d.Dials())
	})

	t.Run("DropConnections", func(t *testing.T) {
		e := newEnv(t)
		c1, r1 := e.dial(t)
		handshake(t, c1, r1, "p1")
		c2, r2 := e.dial(t)
		handshake(t, c2, r2, "p2")

		e.d.DropConnections()
		for _, r := range []*recorder{r1, r2} {
			require.ErrorIs(t, r.waitClosed(t), mem.ErrDropped)
		}
		assert.Zero(t, e.d.Conns())
		for _, c := range []transport.Conn{c1, c2} {
			require.ErrorIs(t, c.WriteFrame(&transport.Buffer{Bytes: batchFrame(1, 1)}), transport.ErrClosed)
		}
		e.d.DropConnections() // nothing left to drop
		assert.Empty(t, e.store.Producers())

		// It is a one-off: new connections work.
		c3, r3 := e.dial(t)
		handshake(t, c3, r3, "p1")
		write(t, c3, batchFrame(1, 2))
		assert.Equal(t, uint64(2), receipt(t, r3.waitFrames(t, 3)[2]))

		closeDialer(t, e.d)
		for _, r := range []*recorder{r1, r2} {
			r.check(t) // once, and not again with ErrDialerClosed
			assert.Len(t, r.frames(), 2)
		}
	})

	t.Run("DropAfterFrames", func(t *testing.T) {
		e := newEnv(t)
		e.d.DropAfterFrames(4)

		// HELLO, TOPIC and two batches are processed, then the connection
		// is cut.
		c, r := e.dial(t)
		handshake(t, c, r, "p")
		for seq := uint64(1); seq <= 5; seq++ {
			writeMaybe(t, c, batchFrame(seq, 1))
		}
		require.ErrorIs(t, r.waitClosed(t), mem.ErrDropped)
		fs := r.frames()
		rs := receipts(t, fs[2:])
		require.NotEmpty(t, rs, "the two batches are acknowledged before the cut")
		assert.Equal(t, uint64(2), rs[len(rs)-1])
		assert.Equal(t, seqRange(1, 2), seqs(e.store, "p"))
		require.ErrorIs(t, c.WriteFrame(&transport.Buffer{Bytes: batchFrame(6, 1)}), transport.ErrClosed)

		// It applies to the next connection too, counting from zero.
		c, r = e.dial(t)
		assert.Equal(t, uint64(2), handshake(t, c, r, "p").LastSeq)
		for seq := uint64(3); seq <= 5; seq++ {
			writeMaybe(t, c, batchFrame(seq, 1))
		}
		require.ErrorIs(t, r.waitClosed(t), mem.ErrDropped)
		rs = receipts(t, r.frames()[2:])
		require.NotEmpty(t, rs)
		assert.Equal(t, uint64(4), rs[len(rs)-1])
		assert.Equal(t, seqRange(1, 4), seqs(e.store, "p"))

		// Off, then on again for an open connection that has already
		// processed that many frames: its next frame is not processed.
		e.d.DropAfterFrames(0)
		c, r = e.dial(t)
		handshake(t, c, r, "p")
		write(t, c, batchFrame(5, 1))
		assert.Equal(t, uint64(5), receipt(t, r.waitFrames(t, 3)[2]))
		e.d.DropAfterFrames(2)
		writeMaybe(t, c, batchFrame(6, 1))
		require.ErrorIs(t, r.waitClosed(t), mem.ErrDropped)
		assert.Len(t, r.frames(), 3)
		assert.Equal(t, seqRange(1, 5), seqs(e.store, "p"))

		// Negative turns it off.
		e.d.DropAfterFrames(-1)
		c, r = e.dial(t)
		handshake(t, c, r, "p")
		for seq := uint64(6); seq <= 10; seq++ {
			write(t, c, batchFrame(seq, 1))
		}
		receipts(t, r.waitReceipt(t, 10)[2:])
		assert.False(t, r.isClosed())
	})

	t.Run("DropReceipts", func(t *testing.T) {
		e := newEnv(t)
		e.d.DropReceipts(true)
		c, r := e.dial(t)
		assert.Zero(t, handshake(t, c, r, "p").LastSeq, "HELLO_OK and TOPIC_OK still delivered")
		write(t, c, batchFrame(1, 3))
		// The broker counts a batch once its receipt went to the peer,
		// which dropped it: no receipt is on its way.
		waitUntil(t, func() bool { return e.broker.Stats().Batches == 1 }, "the batch stored")
		write(t, c, pingFrame(7))
		fs := r.waitFrames(t, 3)
		assert.Equal(t, uint64(7), pong(t, fs[2]), "no receipt before the PONG")
		assert.Equal(t, seqRange(1, 3), seqs(e.store, "p"), "records still stored")

		// Errors still get through.
		e.d.DropReceipts(false)
		write(t, c, batchFrame(4, 2))
		assert.Equal(t, uint64(5), receipt(t, r.waitFrames(t, 4)[3]), "receipts are cumulative")
		e.d.DropReceipts(true)
		write(t, c, wire.AppendReceipt(nil, wire.Receipt{Seq: 1}))
		require.ErrorIs(t, r.waitClosed(t), broker.ErrProtocol)
		fs = r.frames()
		require.Len(t, fs, 5)
		assert.Equal(t, wire.CodeProtocol, errorFrame(t, fs[4]).Code)
	})

	t.Run("DelayReceipts", func(t *testing.T) {
		const delay = 30 * time.Millisecond
		e := newEnv(t)
		e.d.DelayReceipts(delay)
		c, r := e.dial(t)

		// Each frame waits for its reply, so that every reply is one
		// frame's.
		var sent []time.Time
		sent = append(sent, time.Now())
		write(t, c, helloFrame(t, "p"))
		r.waitFrames(t, 1)
		sent = append(sent, time.Now())
		write(t, c, topicFrame(t))
		r.waitFrames(t, 2)
		for seq := uint64(1); seq <= 4; seq++ {
			sent = append(sent, time.Now())
			write(t, c, batchFrame(seq, 1))
			r.waitFrames(t, int(seq)+2)
		}
		evs := r.frameEvents()
		require.Len(t, evs, 6)
		helloOK(t, evs[0].frame)
		topicOK(t, evs[1].frame)
		for i, ev := range evs {
			assert.GreaterOrEqual(t, ev.at.Sub(sent[i]), delay, "frame %d arrived early", i)
			if i > 1 {
				assert.Equal(t, uint64(i-1), receipt(t, ev.frame), "in order")
			}
		}
		assert.Equal(t, seqRange(1, 4), seqs(e.store, "p"))

		// Order is kept when the delay changes: a frame sent without delay
		// waits behind a delayed one.
		const long = 100 * time.Millisecond
		e.d.DelayReceipts(long)
		t5 := time.Now()
		write(t, c, batchFrame(5, 1))
		waitUntil(t, func() bool { return e.store.Len("p") == 5 }, "batch 5 stored")
		e.d.DelayReceipts(0)
		write(t, c, batchFrame(6, 1))
		r.waitFrames(t, 8)
		evs = r.frameEvents()
		assert.Equal(t, uint64(5), receipt(t, evs[6].frame))
		assert.Equal(t, uint64(6), receipt(t, evs[7].frame))
		assert.GreaterOrEqual(t, evs[6].at.Sub(t5), long)
		assert.False(t, evs[7].at.Before(evs[6].at))

		// Negative turns it off.
		e.d.DelayReceipts(-time.Second)
		write(t, c, pingFrame(1))
		assert.Equal(t, uint64(1), pong(t, r.waitFrames(t, 9)[8]))
	})

	t.Run("StallWrites", func(t *testing.T) {
		e := newEnv(t)
		c, r := e.dial(t)
		handshake(t, c, r, "p")
		e.d.StallWrites(true)
		e.d.StallWrites(true) // idempotent
		const batches = 10
		for seq := uint64(1); seq <= batches; seq++ {
			write(t, c, batchFrame(seq, 1))
		}
		// Nothing can be awaited here: check for a while that nothing is
		// processed (this can only pass wrongly, never fail wrongly).
		require.Never(t, func() bool {
			return e.store.Len("p") > 0 || r.nframes() > 2 || e.broker.Stats().Batches > 0
		}, 50*time.Millisecond, 5*time.Millisecond, "a frame was processed while stalled")

		e.d.StallWrites(false)
		receipts(t, r.waitReceipt(t, batches)[2:])
		assert.Equal(t, seqRange(1, batches), seqs(e.store, "p"))
		e.d.StallWrites(false) // idempotent
	})

	t.Run("StallWrites then Close", func(t *testing.T) {
		e := newEnv(t)
		e.d.StallWrites(true)
		c, r := e.dial(t)
		// More frames than the queue holds: the writer blocks.
		writerDone := make(chan error, 1)
		go func() {
			for i := range 1000 {
				if err := c.WriteFrame(&transport.Buffer{Bytes: pingFrame(uint64(i))}); err != nil {
					writerDone <- err
					return
				}
			}
			writerDone <- nil
		}()
		require.NoError(t, c.Close())
		require.ErrorIs(t, testkit.WaitChan(t, writerDone, "the blocked writer"), transport.ErrClosed)
		require.NoError(t, r.waitClosed(t))
		closeDialer(t, e.d) // returns although still stalled
		assert.Empty(t, r.frames(), "nothing processed")
		r.check(t)
	})

	t.Run("StallWrites then Dialer.Close", func(t *testing.T) {
		e := newEnv(t)
		c, r := e.dial(t)
		handshake(t, c, r, "p")
		e.d.StallWrites(true)
		write(t, c, batchFrame(1, 1))
		closeDialer(t, e.d)
		require.ErrorIs(t, r.waitClosed(t), mem.ErrDialerClosed)
		assert.Zero(t, e.store.Len("p"))
		r.check(t)
	})

	t.Run("CorruptFrames", func(t *testing.T) {
		e := newEnv(t)
		c, r := e.dial(t)
		handshake(t, c, r, "p")
		write(t, c, batchFrame(1, 2))
		r.waitFrames(t, 3)

		e.d.CorruptFrames(1)
		write(t, c, batchFrame(3, 2))
		err := r.waitClosed(t)
		require.ErrorIs(t, err, broker.ErrProtocol)
		require.ErrorIs(t, err, wire.ErrChecksum)
		fs := r.frames()
		require.Len(t, fs, 4)
		assert.Equal(t, wire.CodeChecksum, errorFrame(t, fs[3]).Code)
		r.mu.Lock()
		assert.True(t, r.events[len(r.events)-1].closed, "the ERROR comes before OnClose")
		r.mu.Unlock()
		assert.Equal(t, seqRange(1, 2), seqs(e.store, "p"), "the corrupt batch is not stored")

		// One frame only: the next connection works.
		c, r = e.dial(t)
		assert.Equal(t, uint64(2), handshake(t, c, r, "p").LastSeq)
		write(t, c, batchFrame(3, 2))
		assert.Equal(t, uint64(4), receipt(t, r.waitFrames(t, 3)[2]))
	})

	// CorruptFrames promises an ERROR and a close whatever the frame: a
	// corrupt HELLO must not register a mangled producer name.
	t.Run("CorruptFrames HELLO", func(t *testing.T) {
		e := newEnv(t)
		e.d.CorruptFrames(1)
		c, r := e.dial(t)
		writeMaybe(t, c, helloFrame(t, "p"))
		writeMaybe(t, c, batchFrame(1, 1))
		require.ErrorIs(t, r.waitClosed(t), broker.ErrProtocol)
		fs := r.frames()
		require.Len(t, fs, 1)
		errorFrame(t, fs[0])
		assert.Empty(t, e.store.Producers())
	})

	for _, tt := range []struct {
		name  string
		frame []byte
	}{
		{"PING", pingFrame(1)},
		{"HELLO_OK", wire.AppendHelloOK(nil, wire.HelloOK{MaxFrameSize: wire.DefaultMaxFrameSize, Epoch: 1})},
	} {
		t.Run("CorruptFrames "+tt.name, func(t *testing.T) {
			e := newEnv(t)
			c, r := e.dial(t)
			handshake(t, c, r, "p")
			e.d.CorruptFrames(1)
			write(t, c, tt.frame)
			require.ErrorIs(t, r.waitClosed(t), broker.ErrProtocol)
			fs := r.frames()
			require.Len(t, fs, 3)
			errorFrame(t, fs[2])
		})
	}

	// The corruption happens "on the wire": the caller's frame, which it
	// may send again on another connection, is left intact.
	t.Run("CorruptFrames leaves the caller's bytes", func(t *testing.T) {
		e := newEnv(t)
		batch := batchFrame(1, 3)
		want := bytes.Clone(batch)

		c, r := e.dial(t)
		handshake(t, c, r, "p")
		e.d.CorruptFrames(1)
		write(t, c, batch)
		r.waitClosed(t)
		assert.Equal(t, want, batch)

		c, r = e.dial(t)
		handshake(t, c, r, "p")
		write(t, c, batch)
		assert.Equal(t, uint64(3), receipt(t, r.waitFrames(t, 3)[2]))
	})

	t.Run("SetBroker", func(t *testing.T) {
		e := newEnv(t)
		c1, r1 := e.dial(t)
		handshake(t, c1, r1, "old")
		c, r := e.dial(t)
		handshake(t, c, r, "p")
		write(t, c, batchFrame(1, 5))
		r.waitFrames(t, 3)
		require.NoError(t, c.Close())
		r.waitClosed(t)

		// A restarted broker with the same store.
		b2, err := broker.New(e.store)
		require.NoError(t, err)
		e.d.SetBroker(b2)
		c, r = e.dial(t)
		assert.Equal(t, uint64(5), handshake(t, c, r, "p").LastSeq)
		write(t, c, batchFrame(4, 4))
		assert.Equal(t, uint64(7), receipt(t, r.waitFrames(t, 3)[2]))
		assert.Equal(t, seqRange(1, 7), seqs(e.store, "p"))
		// A broker counts a frame in Batches just after it handed the
		// frame's receipt on, on the topic's goroutine: a receipt can
		// arrive before its frame is counted.
		testkit.StatsAfter(t, b2, 1)
		assert.Equal(t, uint64(1), b2.Stats().Batches)
		assert.Equal(t, uint64(2), b2.Stats().Duplicates)
		testkit.StatsAfter(t, e.broker, 1)
		assert.Equal(t, uint64(1), e.broker.Stats().Batches)

		// The open connection keeps its broker.
		write(t, c1, batchFrame(1, 1))
		r1.waitFrames(t, 3)
		testkit.StatsAfter(t, e.broker, 2)
		assert.Equal(t, uint64(2), e.broker.Stats().Batches)
		assert.Equal(t, uint64(1), b2.Stats().Batches)

		// A broker with a fresh store knows nothing.
		b3, err := broker.New(broker.NewMemoryStore())
		require.NoError(t, err)
		e.d.SetBroker(b3)
		c, r = e.dial(t)
		assert.Zero(t, handshake(t, c, r, "p").LastSeq)

		closeDialer(t, e.d)
		for _, b := range []*broker.Broker{e.broker, b2, b3} {
			assert.Zero(t, b.Stats().Sessions)
		}
	})
}

func TestDuplicateReceipts(t *testing.T) {
	e := newEnv(t)
	e.d.DuplicateReceipts(true)
	c, r := e.dial(t)
	handshake(t, c, r, "dup")
	write(t, c, batchFrame(1, 1))
	var types []wire.Type
	for _, f := range r.waitFrames(t, 4) {
		types = append(types, typeOf(t, f))
	}
	assert.Equal(t, []wire.Type{wire.TypeHelloOK, wire.TypeTopicOK, wire.TypeReceipt, wire.TypeReceipt}, types, "the HELLO_OK and TOPIC_OK once, the receipt twice")
	assert.Equal(t, 1, e.store.Len("dup"))
}
