package inflight_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/faultproxy"
	"github.com/inflightmq/inflight/internal/leakcheck"
	"github.com/inflightmq/inflight/server"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/transport/tcp"
	"github.com/inflightmq/inflight/wire"
)

var (
	chaosSeed  = flag.Uint64("chaos.seed", 0, "run only this chaos seed (reproduces a failure)")
	chaosSeeds = flag.Int("chaos.seeds", 200, "how many chaos seeds to run over mem (make chaos runs thousands)")
	chaosTCP   = flag.Int("chaos.tcpseeds", 30, "how many chaos seeds to run over tcp through a fault proxy")
	chaosTLS   = flag.Int("chaos.tlsseeds", 10, "how many chaos seeds to run over stdnet with TLS through a fault proxy")
)

// chaosTolerance is how late after its deadline a callback may run in a
// chaos run. The producer itself reports within a millisecond or two
// (TestSendAsyncTimesOutWhileDisconnected holds it to 50 ms); this bound
// absorbs a 2-core machine shared with other test binaries, under -race.
const chaosTolerance = time.Second

// TestChaos is a property test: many senders, random payloads, random
// per-message deadlines and cancels, every fault the mem transport has, and
// a Close at a random moment. After each run it checks that
//  1. every SendAsync that returned nil got exactly one callback, and the
//     others none;
//  2. successes came in each sender's send order;
//  3. every success is in the store exactly once, and nothing is stored twice;
//     every stored record has the bytes that were sent, although each
//     callback writes over its message's payload (the sender reusing it);
//  4. no callback ran later than its message's deadline plus a tolerance;
//  5. no goroutine is left and the heap returns to its baseline.
//
// A run is decided by its seed: its random choices are; goroutine timing is
// not, so a failing seed reproduces the same scenario, usually the same
// failure. Reproduce with: go test . -run TestChaos -chaos.seed=N
func TestChaos(t *testing.T) { chaos(t, *chaosSeeds, newMemChaos) }

// TestChaosTCP is TestChaos over real loopback sockets, with a fault proxy
// between the producer and a TCP broker.
func TestChaosTCP(t *testing.T) { chaos(t, *chaosTCP, newTCPChaos) }

// TestChaosTLS is TestChaosTCP over transport/stdnet with TLS: the fault
// proxy cuts, stalls and delays TLS records.
func TestChaosTLS(t *testing.T) { chaos(t, *chaosTLS, newTLSChaos) }

func chaos(t *testing.T, n int, newNet func(t *testing.T) chaosNet) {
	seeds := make([]uint64, 0, n)
	if *chaosSeed != 0 {
		seeds = append(seeds, *chaosSeed)
	} else {
		if testing.Short() {
			n = min(n, 20)
		}
		for s := 1; s <= n; s++ {
			seeds = append(seeds, uint64(s))
		}
	}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var total chaosTotals
	// Runs spend most of their time waiting for deadlines: a few at once
	// keep the machine busy without starving any.
	t.Run("seeds", func(t *testing.T) {
		for _, seed := range seeds {
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				t.Parallel()
				if !runChaos(t, seed, &total, newNet(t)) {
					t.Logf("reproduce with: go test . -run '%s' -chaos.seed=%d", t.Name()[:strings.Index(t.Name(), "/")], seed)
				}
			})
		}
	})
	t.Logf("%d seeds: %d messages checked (%d acked, %d timed out, %d canceled, %d closed, %d refused), %d faults injected",
		len(seeds), total.messages.Load(), total.acked.Load(), total.timedOut.Load(), total.canceled.Load(),
		total.closed.Load(), total.refused.Load(), total.faults.Load())
	require.NoError(t, goleak.Find(leakcheck.Options()...), "goroutines left after every Close")
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	require.Less(t, int64(after.HeapInuse)-int64(before.HeapInuse), int64(32<<20), "heap back to its baseline after every Close")
}

type chaosTotals struct {
	messages, acked, timedOut, canceled, closed, refused, faults atomic.Int64
}

// chaosMsg is what the test knows about one message.
type chaosMsg struct {
	sender, index int
	deadline      time.Time // min(ctx deadline, send + SendTimeout)
	accepted      bool
	calls         int
	err           error
	id            core.MessageID
	at            time.Time
	start, ret    time.Time // SendAsync called and returned
	kind          string    // how its context ends
	payload       []byte    // a copy of what was sent
	topic         string    // its Message.Topic ("": the producer's)
}

// runChaos runs one seed and reports whether all properties held.
func runChaos(t *testing.T, seed uint64, total *chaosTotals, cn chaosNet) (ok bool) {
	defer func() { ok = !t.Failed() }()
	r := rand.New(rand.NewPCG(seed, seed*0x9e3779b97f4a7c15))
	store := cn.Store()

	timeout := time.Duration(20+r.IntN(180)) * time.Millisecond
	opts := []core.Option{
		core.Name("chaos"),
		core.SendTimeout(timeout),
		core.MaxPending(8 + r.IntN(500)),
		core.MaxPendingBytes(int64(4<<10 + r.IntN(256<<10))),
		core.BlockIfFull(r.IntN(4) != 0),
		core.MaxBatchMessages(1 + r.IntN(300)),
		core.ReconnectBackoff(time.Millisecond, time.Duration(1+r.IntN(20))*time.Millisecond),
		core.Heartbeat(time.Duration(20+r.IntN(100)) * time.Millisecond),
		core.HandshakeTimeout(50 * time.Millisecond),
	}
	if r.IntN(3) == 0 {
		codec := []wire.Codec{wire.CodecZstd, wire.CodecS2, wire.CodecSnappy}[r.IntN(3)]
		opts = append(opts, core.Compression(codec, wire.LevelFastest))
	}
	if r.IntN(4) == 0 {
		opts = append(opts, core.Linger(time.Duration(r.IntN(3))*time.Millisecond))
	}
	p, err := core.New(cn.Dialer(), opts...)
	require.NoError(t, err)

	// Each message goes to one of 1 to 4 topics, at random: "" (the
	// producer's Topic option) and named ones. Every check below holds per
	// topic: order, one stored copy, the stored ID.
	topics := []string{""}
	for k := range r.IntN(4) {
		topics = append(topics, fmt.Sprint("chaos.", k))
	}
	senders := 1 + r.IntN(6)
	perSender := 50 + r.IntN(300)
	msgs := make([][]*chaosMsg, senders)
	var mu sync.Mutex // guards the chaosMsg fields the callbacks write
	var wg sync.WaitGroup
	stopFaults := make(chan struct{})
	var faultWG sync.WaitGroup
	faultSeed := r.Uint64()
	faultWG.Go(func() { injectFaults(rand.New(rand.NewPCG(faultSeed, 1)), cn, stopFaults, &total.faults) })

	closeAfter := time.Duration(r.IntN(int(2 * timeout)))
	closeCtxTimeout := time.Duration(r.IntN(int(timeout)))
	for s := range senders {
		msgs[s] = make([]*chaosMsg, perSender)
		sr := rand.New(rand.NewPCG(seed, uint64(s)+100))
		wg.Go(func() {
			for i := range perSender {
				m := &chaosMsg{sender: s, index: i}
				msgs[s][i] = m
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				start := time.Now()
				m.start, m.kind = start, "none"
				m.deadline = start.Add(timeout)
				switch sr.IntN(10) {
				case 0, 1: // a context deadline, maybe before SendTimeout
					dl := time.Duration(1+sr.IntN(int(timeout/time.Millisecond)*2)) * time.Millisecond
					ctx, cancel = context.WithTimeout(ctx, dl)
					m.kind = fmt.Sprint("deadline ", dl)
					if start.Add(dl).Before(m.deadline) {
						m.deadline = start.Add(dl)
					}
				case 2: // canceled at some point
					ctx, cancel = context.WithCancel(ctx)
					after := time.Duration(sr.IntN(int(timeout)))
					time.AfterFunc(after, cancel)
					m.kind = fmt.Sprint("cancel after ", after)
				}
				size := 8 + sr.IntN(200)
				if sr.IntN(10) == 0 { // a larger one: several take the window's bytes
					size = 2<<10 + sr.IntN(6<<10)
				}
				payload := make([]byte, size)
				binary.BigEndian.PutUint32(payload, uint32(s))
				binary.BigEndian.PutUint32(payload[4:], uint32(i))
				for k := 8; k < len(payload); k++ {
					payload[k] = byte(sr.Uint32())
				}
				m.payload = bytes.Clone(payload)
				m.topic = topics[sr.IntN(len(topics))]
				// No lock across SendAsync: it may wait for room, which only
				// the callbacks (which take the lock) make.
				err := p.SendAsync(ctx, &core.Message{Payload: payload, Topic: m.topic}, func(id core.MessageID, msg *core.Message, err error) {
					mu.Lock()
					defer mu.Unlock()
					m.calls++
					m.id, m.err, m.at = id, err, time.Now()
					// The payload is the sender's again: reuse it. What the
					// broker stores must not change.
					for k := 8; k < len(msg.Payload); k++ {
						msg.Payload[k] ^= 0xff
					}
				})
				mu.Lock()
				m.accepted, m.ret = err == nil, time.Now()
				if err != nil {
					m.err = err
				}
				mu.Unlock()
				if err != nil && errors.Is(err, core.ErrClosed) {
					cancel()
					return
				}
				if sr.IntN(20) == 0 {
					time.Sleep(time.Duration(sr.IntN(2000)) * time.Microsecond)
				}
				_ = cancel // a context with a timeout ends by itself
			}
		})
	}

	time.Sleep(closeAfter)
	closeStart := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), closeCtxTimeout)
	_ = p.Close(ctx)
	cancel()
	closed := time.Since(closeStart)
	// A Close whose ctx ended returns at once; the callbacks still owed run
	// afterwards. A second Close waits for them.
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	require.NoError(t, p.Close(ctx), "the callbacks owed after Close")
	cancel()
	wg.Wait()
	close(stopFaults)
	faultWG.Wait()
	cn.Close()

	// 1-4.
	mu.Lock()
	defer mu.Unlock()
	stored := map[[2]uint32]uint64{}
	for _, topic := range topics {
		lastSeq := uint64(0)
		for _, rec := range store.TopicRecords(storedTopic(topic), "chaos") {
			key := [2]uint32{binary.BigEndian.Uint32(rec.Payload), binary.BigEndian.Uint32(rec.Payload[4:])}
			_, dup := stored[key]
			require.False(t, dup, "message %v stored twice", key)
			require.Less(t, int(key[0]), senders, "record of an unknown sender")
			require.Less(t, int(key[1]), len(msgs[key[0]]), "record of an unknown message")
			m := msgs[key[0]][key[1]]
			if m == nil || !bytes.Equal(rec.Payload, m.payload) {
				t.Fatalf("message %v stored with other bytes than were sent", key)
			}
			require.Equal(t, m.topic, topic, "message %v stored on another topic", key)
			require.Greater(t, rec.Seq, lastSeq, "topic %q: sequence IDs stored out of order or twice", topic)
			stored[key], lastSeq = rec.Seq, rec.Seq
		}
	}
	sentTo := map[string]bool{}
	for _, topic := range topics {
		sentTo[storedTopic(topic)] = true
	}
	for _, st := range store.Streams() {
		require.True(t, sentTo[st[0]], "stored on a topic never sent to: %v", st)
	}
	for s := range senders {
		lastOK := map[string]int{} // per topic
		for i, m := range msgs[s] {
			if m == nil {
				break // the sender stopped at ErrClosed
			}
			total.messages.Add(1)
			if !m.accepted {
				require.Zero(t, m.calls, "sender %d message %d: refused (%v) but called back", s, i, m.err)
				total.refused.Add(1)
				continue
			}
			require.Equal(t, 1, m.calls, "sender %d message %d: callbacks", s, i)
			late := m.at.Sub(m.deadline)
			if errors.Is(m.err, core.ErrClosed) {
				late = m.at.Sub(closeStart.Add(closed)) // Close decides when these end
			}
			require.LessOrEqual(t, late, chaosTolerance, "sender %d message %d: callback (%v) late by %v; ctx %s, SendTimeout %v, SendAsync took %v, called back %v after start",
				s, i, m.err, late, m.kind, timeout, m.ret.Sub(m.start), m.at.Sub(m.start))
			switch {
			case m.err == nil:
				total.acked.Add(1)
				if prev, ok := lastOK[m.topic]; ok {
					require.Greater(t, i, prev, "sender %d topic %q: success out of order", s, m.topic)
				}
				lastOK[m.topic] = i
				seq, ok := stored[[2]uint32{uint32(s), uint32(i)}]
				require.True(t, ok, "sender %d message %d: success missing from the store", s, i)
				require.Equal(t, uint64(m.id), seq, "sender %d message %d: stored under another ID", s, i)
			case errors.Is(m.err, core.ErrTimeout):
				total.timedOut.Add(1)
			case errors.Is(m.err, context.Canceled), errors.Is(m.err, context.DeadlineExceeded):
				total.canceled.Add(1)
			case errors.Is(m.err, core.ErrClosed):
				total.closed.Add(1)
			default:
				t.Fatalf("sender %d message %d: unexpected error %v", s, i, m.err)
			}
		}
	}
	return true // 5 is checked once all seeds ran (they run side by side)
}

// injectFaults injects random faults until stop.
func injectFaults(r *rand.Rand, cn chaosNet, stop <-chan struct{}, count *atomic.Int64) {
	defer cn.heal() // leave the broker reachable
	for {
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(r.IntN(8000)) * time.Microsecond):
		}
		if cn.inject(r) {
			count.Add(1)
		}
	}
}

// chaosNet is a broker behind a transport whose faults a chaos run injects.
type chaosNet interface {
	Dialer() transport.Dialer
	Store() *broker.MemoryStore
	Close()
	inject(r *rand.Rand) bool // one random fault (false: a quiet moment)
	heal()                    // everything reachable again
}

// memChaos is the suite's mem fixture, injecting every fault mem has.
type memChaos struct{ *memFixture }

func newMemChaos(t *testing.T) chaosNet { return memChaos{newMemFixture(t).(*memFixture)} }

func (c memChaos) heal() { c.dialer.RefuseDials(false); c.dialer.StallWrites(false) }

func (c memChaos) inject(r *rand.Rand) bool {
	d := c.dialer
	switch r.IntN(10) {
	case 0:
		d.DropConnections()
	case 1:
		d.RefuseDials(r.IntN(2) == 0)
	case 2:
		d.DropAfterFrames(r.IntN(6))
	case 3:
		d.DropReceipts(r.IntN(3) == 0)
	case 4:
		d.DelayReceipts(time.Duration(r.IntN(3000)) * time.Microsecond)
	case 5:
		d.DuplicateReceipts(r.IntN(2) == 0)
	case 6:
		d.StallWrites(r.IntN(3) == 0)
	case 7:
		d.CorruptFrames(1)
	default:
		return false
	}
	return true
}

// proxyChaos puts a fault proxy between the producer and a broker's
// server: TestChaosTCP's (a tcp.Dialer) and TestChaosTLS's (a stdnet.Dialer
// over TLS).
type proxyChaos struct {
	st    *broker.MemoryStore
	srv   *server.Server
	proxy *faultproxy.Proxy
	d     closingDialer
}

// closingDialer is a transport.Dialer the test closes.
type closingDialer interface {
	transport.Dialer
	Close() error
}

// newProxyChaos starts a server with srvOpts and a fault proxy in front of
// it, and dials the proxy's address with dial.
func newProxyChaos(t *testing.T, srvOpts []server.Option, dial func(addr string) (closingDialer, error)) *proxyChaos {
	st := broker.NewMemoryStore()
	b, err := broker.New(st)
	require.NoError(t, err)
	srv, err := server.New("127.0.0.1:0", b, srvOpts...)
	require.NoError(t, err)
	proxy, err := faultproxy.New(srv.Addr().String())
	require.NoError(t, err)
	d, err := dial(proxy.Addr())
	require.NoError(t, err)
	return &proxyChaos{st: st, srv: srv, proxy: proxy, d: d}
}

func newTCPChaos(t *testing.T) chaosNet {
	return newProxyChaos(t, nil, func(addr string) (closingDialer, error) { return tcp.NewDialer(addr) })
}

func (c *proxyChaos) Dialer() transport.Dialer   { return c.d }
func (c *proxyChaos) Store() *broker.MemoryStore { return c.st }
func (c *proxyChaos) heal()                      { c.proxy.Refuse(false); c.proxy.Stall(false); c.proxy.Delay(0) }

func (c *proxyChaos) Close() {
	c.d.Close()
	c.proxy.Close()
	c.srv.Close(context.Background())
}

func (c *proxyChaos) inject(r *rand.Rand) bool {
	switch r.IntN(8) {
	case 0:
		c.proxy.Cut()
	case 1:
		c.proxy.Refuse(r.IntN(2) == 0)
	case 2:
		c.proxy.Stall(r.IntN(3) == 0)
	case 3:
		c.proxy.Delay(time.Duration(r.IntN(3000)) * time.Microsecond)
	case 4:
		c.srv.CloseConns()
	default:
		return false
	}
	return true
}
