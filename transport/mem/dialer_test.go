package mem_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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

// The Dialer implements transport.Dialer.
var _ transport.Dialer = (*mem.Dialer)(nil)

func TestRoundTrip(t *testing.T) {
	e := newEnv(t)
	bufs := newBuffers()
	c, r := e.dial(t)
	assert.Equal(t, 1, e.d.Dials())
	assert.Equal(t, 1, e.d.Conns())

	require.NoError(t, c.WriteFrame(bufs.buf(helloFrame(t, "p"))))
	require.NoError(t, c.WriteFrame(bufs.buf(topicFrame(t))))
	fs := r.waitFrames(t, 2)
	assert.Equal(t, uint32(wire.DefaultMaxFrameSize), helloOK(t, fs[0]).MaxFrameSize)
	assert.Zero(t, topicOK(t, fs[1]).LastSeq)

	const batches, per = 20, 5
	for i := range batches {
		require.NoError(t, c.WriteFrame(bufs.buf(batchFrame(uint64(i*per)+1, per))))
	}
	fs = r.waitReceipt(t, batches*per)
	for _, seq := range receipts(t, fs[2:]) {
		assert.Zero(t, seq%per, "a receipt acknowledges whole frames")
	}
	recs := e.store.Records("p")
	require.Len(t, recs, batches*per)
	for i, rec := range recs {
		assert.Equal(t, uint64(i+1), rec.Seq)
		assert.Equal(t, string(payload(uint64(i+1))), string(rec.Payload))
	}

	// Every buffer is released exactly once.
	seen := map[*transport.Buffer]bool{}
	waitUntil(t, func() bool { return bufs.released(t, seen) == bufs.n }, "%d buffers released", bufs.n)

	require.NoError(t, c.Close())
	require.NoError(t, r.waitClosed(t), "a local Close reports nil")
	closeDialer(t, e.d)
	assert.Equal(t, bufs.n, bufs.released(t, seen), "no buffer released twice")
	r.check(t)
}

// TestReleaseWithoutOwner: a Buffer with no Owner is simply dropped.
func TestReleaseWithoutOwner(t *testing.T) {
	e := newEnv(t)
	c, r := e.dial(t)
	handshake(t, c, r, "p")
	write(t, c, batchFrame(1, 1))
	assert.Equal(t, uint64(1), receipt(t, r.waitFrames(t, 3)[2]))
}

func TestDialContext(t *testing.T) {
	e := newEnv(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer cancel2()
	for _, tt := range []struct {
		ctx  context.Context
		want error
	}{{cancelled, context.Canceled}, {expired, context.DeadlineExceeded}} {
		c, err := e.d.Dial(tt.ctx, newRecorder())
		require.ErrorIs(t, err, tt.want)
		assert.Nil(t, c)
	}
	assert.Zero(t, e.d.Dials())
	assert.Zero(t, e.d.Conns())
	assert.Zero(t, e.broker.Stats().Sessions)
}

func TestDialerClose(t *testing.T) {
	e := newEnv(t)
	var conns []transport.Conn
	var recs []*recorder
	for i := range 3 {
		c, r := e.dial(t)
		handshake(t, c, r, fmt.Sprintf("p%d", i))
		conns, recs = append(conns, c), append(recs, r)
	}
	// One closed by its owner before: Close leaves its reason alone.
	early, earlyRec := e.dial(t)
	require.NoError(t, early.Close())
	require.NoError(t, earlyRec.waitClosed(t))
	assert.Equal(t, 3, e.d.Conns())

	closeDialer(t, e.d)
	for i, r := range recs {
		require.ErrorIs(t, r.waitClosed(t), mem.ErrDialerClosed, "conn %d", i)
		r.check(t)
	}
	earlyRec.check(t)
	assert.Zero(t, e.d.Conns())
	assert.Equal(t, 4, e.d.Dials())
	assert.Zero(t, e.broker.Stats().Sessions, "every session closed")

	// Idempotent.
	closeDialer(t, e.d)

	// Later dials fail; old connections are closed for good.
	c, err := e.d.Dial(context.Background(), newRecorder())
	require.ErrorIs(t, err, mem.ErrDialerClosed)
	assert.Nil(t, c)
	assert.Equal(t, 4, e.d.Dials())
	for _, c := range conns {
		require.ErrorIs(t, c.WriteFrame(&transport.Buffer{Bytes: pingFrame(1)}), transport.ErrClosed)
		require.NoError(t, c.Close())
	}
	for _, r := range recs {
		r.check(t) // still exactly one OnClose
	}
}

func TestConnCloseIdempotent(t *testing.T) {
	e := newEnv(t)
	c, r := e.dial(t)
	handshake(t, c, r, "p")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { assert.NoError(t, c.Close()) })
	}
	wg.Wait()
	require.NoError(t, r.waitClosed(t))
	require.ErrorIs(t, c.WriteFrame(&transport.Buffer{Bytes: pingFrame(1)}), transport.ErrClosed)
	assert.Zero(t, e.d.Conns())
	closeDialer(t, e.d)
	r.check(t)
}

// TestOnCloseOnce: whatever closes a connection, its Handler sees OnClose
// exactly once, after the last OnFrame, with the reason.
func TestOnCloseOnce(t *testing.T) {
	const pings = 50
	tests := []struct {
		name string
		// setup runs before dialing.
		setup func(e *env)
		// cut closes c, whose HELLO and pings are written and maybe still
		// in flight.
		cut     func(t *testing.T, e *env, c transport.Conn, r *recorder)
		wantErr error // nil: OnClose(nil)
		// orErr, if set, is as good as wantErr: the cut races with
		// something else that closes the connection.
		orErr error
		// wantFrames is the exact number of frames before OnClose, or -1
		// when it depends on timing.
		wantFrames int
	}{
		{
			name:       "conn.Close",
			cut:        func(t *testing.T, _ *env, c transport.Conn, _ *recorder) { require.NoError(t, c.Close()) },
			wantFrames: -1,
		},
		{
			name:       "DropConnections",
			cut:        func(_ *testing.T, e *env, _ transport.Conn, _ *recorder) { e.d.DropConnections() },
			wantErr:    mem.ErrDropped,
			wantFrames: -1,
		},
		{
			name:       "Dialer.Close",
			cut:        func(t *testing.T, e *env, _ transport.Conn, _ *recorder) { closeDialer(t, e.d) },
			wantErr:    mem.ErrDialerClosed,
			wantFrames: -1,
		},
		{
			name: "broker protocol error",
			cut: func(t *testing.T, _ *env, c transport.Conn, r *recorder) {
				r.waitType(t, wire.TypeHelloOK)                            // not lost to the close
				write(t, c, wire.AppendReceipt(nil, wire.Receipt{Seq: 1})) // a producer must not send it
			},
			wantErr:    broker.ErrProtocol,
			wantFrames: 1 + pings + 1, // HELLO_OK, the PONGs, the ERROR
		},
		{
			name:  "DropAfterFrames",
			setup: func(e *env) { e.d.DropAfterFrames(10) },
			cut:   func(*testing.T, *env, transport.Conn, *recorder) {},
			// HELLO and 9 pings answered
			wantErr:    mem.ErrDropped,
			wantFrames: 10,
		},
		{
			name: "takeover",
			cut: func(t *testing.T, e *env, _ transport.Conn, r *recorder) {
				r.waitType(t, wire.TypeHelloOK) // the first connection holds the name
				c2, r2 := e.dial(t)
				handshake(t, c2, r2, "p")
			},
			// The new session closes the old one's peer, unless the old
			// session's reader, handling a PING, saw first that it was
			// fenced.
			wantErr:    mem.ErrClosedByBroker,
			orErr:      broker.ErrFenced,
			wantFrames: -1,
		},
		{
			// Replies held back by a delay are delivered at the close,
			// before OnClose.
			name:  "conn.Close with delayed replies",
			setup: func(e *env) { e.d.DelayReceipts(time.Hour) },
			cut: func(t *testing.T, e *env, c transport.Conn, _ *recorder) {
				waitUntil(t, func() bool { return e.broker.Stats().Batches == 1 }, "the batch processed")
				require.NoError(t, c.Close())
			},
			wantFrames: 1 + 1 + pings + 1, // HELLO_OK, TOPIC_OK, the PONGs, the RECEIPT
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			if tt.setup != nil {
				tt.setup(e)
			}
			c, r := e.dial(t)
			writeMaybe(t, c, helloFrame(t, "p"))
			for i := range pings {
				writeMaybe(t, c, pingFrame(uint64(i)))
			}
			if tt.name == "conn.Close with delayed replies" {
				e.declare(t, c)
				write(t, c, batchFrame(1, 1))
			}
			tt.cut(t, e, c, r)
			err := r.waitClosed(t)
			switch {
			case tt.wantErr == nil:
				require.NoError(t, err)
			case tt.orErr != nil && errors.Is(err, tt.orErr):
			default:
				require.ErrorIs(t, err, tt.wantErr)
			}
			closeDialer(t, e.d) // no Handler call can come after this
			r.check(t)
			if tt.wantFrames >= 0 {
				require.Len(t, r.frames(), tt.wantFrames)
			}
			// Whatever arrived is the replies: the HELLO_OK at most once
			// (the session's HELLO goroutine sends it, so the reader's
			// PONGs may pass it), the PONGs in order, an ERROR last.
			fs, hellos, pongs := r.frames(), 0, uint64(0)
			for i, f := range fs {
				switch typeOf(t, f) {
				case wire.TypeHelloOK:
					helloOK(t, f)
					hellos++
				case wire.TypeTopicOK:
					assert.Equal(t, 1, hellos, "TOPIC_OK after HELLO_OK")
				case wire.TypePong:
					assert.Equal(t, pongs, pong(t, f))
					pongs++
				case wire.TypeError:
					want := wire.CodeProtocol
					if tt.name == "takeover" {
						want = wire.CodeFenced // the new producer instance fenced this one
					}
					assert.Equal(t, want, errorFrame(t, f).Code)
					assert.Equal(t, len(fs)-1, i, "nothing after the ERROR")
				default:
					assert.Equal(t, uint64(1), receipt(t, f))
				}
			}
			assert.LessOrEqual(t, hellos, 1)
			require.ErrorIs(t, c.WriteFrame(&transport.Buffer{Bytes: pingFrame(1)}), transport.ErrClosed)
			assert.Zero(t, e.d.Conns())
		})
	}
}

// TestHandlerNotBeforeDial checks (best effort) that no Handler call comes
// before Dial has returned: connections dialed concurrently are closed as
// soon as their first frame is processed, by DropAfterFrames(1), by a
// protocol error or by another connection taking over their name, and each
// recorder checks that Dial had returned when it was called.
//
// A cut racing with Dial itself (DropConnections or Close from another
// goroutine) is not tested: nothing orders the Dialer's goroutines after the
// caller's first statement after Dial, and under -race the randomized
// scheduler does run them first now and then.
func TestHandlerNotBeforeDial(t *testing.T) {
	const workers, dials = 4, 100
	e := newEnv(t)
	e.d.DropAfterFrames(1)
	recs := make([][]*recorder, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range dials {
				r := newRecorder()
				r.dialed = new(atomic.Bool)
				c, err := e.d.Dial(context.Background(), r)
				r.dialed.Store(true)
				if !assert.NoError(t, err) {
					return
				}
				recs[w] = append(recs[w], r)
				frame := helloFrame(t, fmt.Sprintf("p%d", i%3)) // shared names: takeovers
				if i%4 == 3 {
					frame = pingFrame(uint64(i))
				}
				if i%5 == 4 {
					frame = []byte{0, 0, 0, 1, 0xee} // protocol error
				}
				if err := c.WriteFrame(&transport.Buffer{Bytes: frame}); err != nil {
					assert.ErrorIs(t, err, transport.ErrClosed)
				}
			}
		})
	}
	wg.Wait()
	for _, rs := range recs {
		for _, r := range rs {
			r.waitClosed(t)
		}
	}
	closeDialer(t, e.d)
	for _, rs := range recs {
		for _, r := range rs {
			r.check(t)
			// The reply to the one frame processed, unless a takeover
			// closed the connection before its HELLO_OK was sent; and the
			// ERROR of a new instance of the name that fenced it.
			require.LessOrEqual(t, len(r.frames()), 2)
		}
	}
}

func TestConcurrentConns(t *testing.T) {
	const conns, batches, per = 8, 100, 4
	e := newEnv(t)
	var wg sync.WaitGroup
	recs := make([]*recorder, conns)
	for i := range conns {
		c, r := e.dial(t)
		recs[i] = r
		handshake(t, c, r, fmt.Sprintf("p%d", i))
		wg.Go(func() {
			for k := range batches {
				if err := c.WriteFrame(&transport.Buffer{Bytes: batchFrame(uint64(k*per)+1, per)}); !assert.NoError(t, err) {
					return
				}
			}
		})
	}
	wg.Wait()
	for i, r := range recs {
		name := fmt.Sprintf("p%d", i)
		fs := r.waitReceipt(t, batches*per)
		for _, seq := range receipts(t, fs[2:]) {
			assert.Zero(t, seq%per, "%s: a receipt acknowledges whole frames", name)
		}
		assert.Equal(t, seqRange(1, batches*per), seqs(e.store, name))
	}
	closeDialer(t, e.d)
	for _, r := range recs {
		r.check(t)
	}
}

// TestTakeOverRacingClose: a session that takes a producer name over sends
// the fencing ERROR on the old connection's peer from its own goroutine,
// while the old connection may be closing; the send must fail quietly, not
// panic on a closed queue.
func TestTakeOverRacingClose(t *testing.T) {
	e := newEnv(t)
	for i := range 200 {
		old, oldRec := e.dial(t)
		write(t, old, helloFrame(t, "x"))
		require.Equal(t, wire.TypeHelloOK, typeOf(t, oldRec.waitFrames(t, 1)[0]), "round %d", i)
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			_ = old.Close()
		}()
		c, r := e.dial(t)
		write(t, c, helloFrame(t, "x"))
		require.Equal(t, wire.TypeHelloOK, typeOf(t, r.waitFrames(t, 1)[0]), "round %d: the new incarnation holds the name", i)
		testkit.WaitChan(t, closed, "old connection's Close")
		oldRec.waitClosed(t)
		require.NoError(t, c.Close())
		r.waitClosed(t)
	}
}
