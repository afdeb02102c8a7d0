package core

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/ringbuf"
	"github.com/inflightmq/inflight/transport/mem"
)

// The first topic's exemption from the budget (see ledger.exemptFrom and
// meter) through whole producers: whatever the order of sends, topics,
// releases and Close, the budget ends holding nothing but an exempt
// topic's share.

// exemptRig is a producer on an in-memory broker, for tests that read its
// budget.
type exemptRig struct {
	p *Producer
	d *mem.Dialer
}

func newExemptRig(t *testing.T, opts ...Option) *exemptRig {
	t.Helper()
	b, err := broker.New(broker.NewMemoryStore())
	require.NoError(t, err)
	d := mem.NewDialer(b)
	opts = append([]Option{Name("exempt"), ReconnectBackoff(time.Millisecond, 10*time.Millisecond), ErrorHandler(func(error) {})}, opts...)
	p, err := New(d, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_ = p.Close(ctx)
		ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, p.Close(ctx), "callbacks owed after Close")
		_ = d.Close()
	})
	return &exemptRig{p: p, d: d}
}

// budgetSettles waits until the budget holds n messages, bytes bytes, held
// of them by an exempt share (the dispatcher gives a message's budget back
// just after its position is released, which Flush waits for).
func (r *exemptRig) budgetSettles(t *testing.T, n int, bytes int64, held int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, by := r.p.budget.pending()
		h := r.p.budget.held.Load()
		if c == n && by == bytes && h == held {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("budget holds %d messages, %d bytes, %d held; want %d, %d, %d", c, by, h, n, bytes, held)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// counter counts callbacks and fails the test on an error or a second call
// for one message.
type counter struct {
	t    *testing.T
	mu   sync.Mutex
	seen map[int]bool
	wg   sync.WaitGroup
}

func newCounter(t *testing.T) *counter { return &counter{t: t, seen: map[int]bool{}} }

func (c *counter) cb(i int, wantErr bool) Callback {
	c.wg.Add(1)
	return func(_ MessageID, _ *Message, err error) {
		c.mu.Lock()
		twice := c.seen[i]
		c.seen[i] = true
		c.mu.Unlock()
		if twice {
			c.t.Errorf("message %d: a second callback", i)
			return
		}
		if !wantErr {
			assert.NoError(c.t, err, "message %d", i)
		}
		c.wg.Done()
	}
}

func (c *counter) wait(t *testing.T) {
	t.Helper()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("callbacks missing")
	}
}

// TestBudgetAfterOneTopic: a producer that only ever writes its first
// topic ends with its share held and nothing else, as New left it.
func TestBudgetAfterOneTopic(t *testing.T) {
	r := newExemptRig(t, MaxPending(64), MaxPendingBytes(1<<20))
	share, shareBytes := r.p.cfg.topicPending(), r.p.cfg.topicPendingBytes()
	r.budgetSettles(t, share, shareBytes, int64(share))
	c := newCounter(t)
	for i := range 500 {
		require.NoError(t, r.p.SendAsync(context.Background(), &Message{Payload: []byte("x")}, c.cb(i, false)))
	}
	c.wait(t)
	require.NoError(t, r.p.Flush(context.Background()))
	r.budgetSettles(t, share, shareBytes, int64(share))
	assert.False(t, r.p.budget.busy(), "the coarse clock sees nothing pending")
	assert.Zero(t, r.p.Stats().Pending)
}

// TestBudgetAfterTopicsRace: senders fill the first topic, by SendAsync,
// Send and SendBatch, while other goroutines make new topics: every
// callback runs once, and once everything is released the budget is
// empty, the first topic's share given back. With a connection that drops
// now and then, and a small MaxPending so that senders wait for room.
func TestBudgetAfterTopicsRace(t *testing.T) {
	for round := range 8 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			r := newExemptRig(t, MaxPending(48), MaxPendingPerTopic(16+round*4), BlockIfFull(true), SendTimeout(time.Minute))
			c := newCounter(t)
			var wg sync.WaitGroup
			var next atomic.Int64
			const perSender = 300
			for g := range 3 {
				wg.Go(func() {
					for range perSender {
						i := int(next.Add(1))
						switch i % 7 {
						case 0:
							_, err := r.p.Send(context.Background(), &Message{Payload: []byte("send")})
							assert.NoError(t, err)
						case 1:
							msgs := []*Message{{Payload: []byte("a")}, {Payload: []byte("bb")}, {Payload: []byte("ccc")}}
							cb := c.cb(i, false)
							var once sync.Once
							c.wg.Add(len(msgs) - 1)
							n, err := r.p.SendBatch(context.Background(), msgs, func(id MessageID, m *Message, err error) {
								assert.NoError(t, err)
								once.Do(func() { cb(id, m, err) })
								if m != msgs[0] {
									c.wg.Done()
								}
							})
							assert.NoError(t, err)
							assert.Equal(t, len(msgs), n)
						default:
							topic := ""
							if g == 2 && i > perSender {
								topic = fmt.Sprintf("t%d", i%3) // made while the others send
							}
							assert.NoError(t, r.p.SendAsync(context.Background(), &Message{Topic: topic, Payload: []byte("x")}, c.cb(i, false)))
						}
						if i%250 == 0 {
							r.d.DropConnections()
						}
					}
				})
			}
			wg.Wait()
			c.wait(t)
			require.NoError(t, r.p.Flush(context.Background()))
			require.Greater(t, r.p.Stats().Topics, 1)
			require.False(t, r.p.def.led.exempt())
			r.budgetSettles(t, 0, 0, 0)
			assert.False(t, r.p.budget.busy())
			assert.Zero(t, r.p.Stats().Pending)
			assert.Zero(t, r.p.Stats().PendingBytes)
		})
	}
}

// TestBudgetAfterSecondTopicRetires: the second topic is forgotten once
// idle; the first stays metered, and the budget is empty between and
// after, across a third topic made later.
func TestBudgetAfterSecondTopicRetires(t *testing.T) {
	r := newExemptRig(t, TopicIdleTimeout(20*time.Millisecond))
	ctx := context.Background()
	for _, topic := range []string{"", "second", ""} {
		_, err := r.p.Send(ctx, &Message{Topic: topic, Payload: []byte("x")})
		require.NoError(t, err)
	}
	r.budgetSettles(t, 0, 0, 0)
	deadline := time.Now().Add(10 * time.Second)
	for r.p.Stats().Topics != 1 {
		require.True(t, time.Now().Before(deadline), "the idle topic is not forgotten")
		time.Sleep(time.Millisecond)
	}
	for _, topic := range []string{"", "third", "", "second"} {
		_, err := r.p.Send(ctx, &Message{Topic: topic, Payload: []byte("x")})
		require.NoError(t, err)
	}
	r.budgetSettles(t, 0, 0, 0)
	assert.False(t, r.p.def.led.exempt(), "never exempt again")
}

// TestBudgetAfterCloseWhileExempt: Close fails the first topic's pending
// messages (the broker acknowledges nothing): the budget then holds the
// share, nothing more.
func TestBudgetAfterCloseWhileExempt(t *testing.T) {
	r := newExemptRig(t, MaxPending(64), SendTimeout(time.Minute))
	r.d.DropReceipts(true)
	c := newCounter(t)
	for i := range 20 {
		require.NoError(t, r.p.SendAsync(context.Background(), &Message{Payload: []byte("x")}, c.cb(i, true)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, r.p.Close(ctx), context.DeadlineExceeded)
	c.wait(t)
	// The dispatcher releases a position just after its callback (see
	// ledger.walk): the last ones may be pending still when the callbacks
	// have all run. The exempt topic's messages were within its share, so
	// the budget alone does not show it.
	waitFor(t, "every position released", func() bool { return r.p.Stats().Pending == 0 })
	share, shareBytes := r.p.cfg.topicPending(), r.p.cfg.topicPendingBytes()
	r.budgetSettles(t, share, shareBytes, int64(share))
}

// TestBudgetSecondTopicWhileFirstIsFull: senders of the first topic wait
// for room (the broker acknowledges nothing) when a second topic is made;
// once the broker answers again everything is sent and the budget is
// empty.
func TestBudgetSecondTopicWhileFirstIsFull(t *testing.T) {
	r := newExemptRig(t, MaxPending(16), MaxPendingPerTopic(8), BlockIfFull(true), SendTimeout(time.Minute))
	r.d.DropReceipts(true)
	c := newCounter(t)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 10 {
				assert.NoError(t, r.p.SendAsync(context.Background(), &Message{Payload: []byte("x")}, c.cb(g*100+i, false)))
			}
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for r.p.def.led.ring.Len() < 8 {
		require.True(t, time.Now().Before(deadline), "the first topic does not fill")
		time.Sleep(100 * time.Microsecond)
	}
	assert.NoError(t, r.p.SendAsync(context.Background(), &Message{Topic: "second", Payload: []byte("y")}, c.cb(1000, false)),
		"the second topic has room while the first is full")
	r.d.DropReceipts(false)
	r.d.DropConnections() // what was written is written again, and acknowledged
	wg.Wait()
	c.wait(t)
	require.NoError(t, r.p.Flush(context.Background()))
	r.budgetSettles(t, 0, 0, 0)
}

// TestMeterRacingReleases: meter while claimers publish and the dispatcher
// releases what they published (the share goes back from whichever of the
// two sees the last exempt position released); once everything is
// released, the budget is empty.
func TestMeterRacingReleases(t *testing.T) {
	for range 200 {
		b := newBudget(1<<10, 1<<20, nil)
		l, err := newLedger(1<<8, 1<<16, ledgerTimeout, nil, b, func() {}, make(chan struct{}, 1), false)
		require.NoError(t, err)
		l.exemptFrom()
		var claimers, all sync.WaitGroup
		for range 2 {
			claimers.Go(func() {
				for i := range 100 {
					sizes := []int64{10}
					if i%3 == 0 {
						sizes = []int64{10, 20, 30}
					}
					pos, n, err := l.tryClaim(sizes)
					if err != nil {
						assert.ErrorIs(t, err, ringbuf.ErrFull)
						continue
					}
					l.ring.PublishN(pos, n)
				}
			})
		}
		var stop atomic.Bool
		all.Go(func() { // the dispatcher: releases the published prefix
			for done := false; !done; {
				done = stop.Load()
				h := l.ring.Head()
				for l.ring.Published(h) {
					h++
				}
				l.release(h)
			}
		})
		all.Go(l.meter)
		claimers.Wait()
		stop.Store(true)
		all.Wait()
		l.release(l.ring.Tail())
		c, by := b.pending()
		require.Zero(t, c)
		require.Zero(t, by)
		require.Zero(t, b.held.Load())
		require.False(t, l.shareHeld.Load())
	}
}

// TestCoarseClockBusyWithExemptTopic: the coarse clock counts a producer
// busy while its first topic holds messages, exempt or not, and idle once
// they are released, though the budget still holds an exempt share (or,
// after the second topic, a part of it until the exempt positions go).
func TestCoarseClockBusyWithExemptTopic(t *testing.T) {
	c := newCoarseClock(time.Now())
	b := newBudget(8, 1<<20, nil)
	def, _, err := newTestLedger(4, 1<<10, ledgerTimeout, nil, false)
	require.NoError(t, err)
	def.budget = b
	def.exemptFrom()
	p := &Producer{budget: b, def: &lane{led: def}}
	c.register(p)
	defer c.unregister(p)
	assert.False(t, c.busy(), "an exempt share alone")
	pos, _, err := def.tryClaim([]int64{10})
	require.NoError(t, err)
	def.ring.Publish(pos)
	assert.True(t, c.busy(), "an exempt message pending")
	def.meter()
	assert.True(t, c.busy(), "metered, the exempt message still pending")
	def.release(pos + 1)
	assert.False(t, c.busy(), "released")
	assert.Zero(t, b.held.Load())
	pos, _, err = def.tryClaim([]int64{10})
	require.NoError(t, err)
	def.ring.Publish(pos)
	assert.True(t, c.busy(), "a metered message pending")
	def.release(pos + 1)
	assert.False(t, c.busy())
}
