package tcp_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/server"
	"github.com/inflightmq/inflight/transport/tcp"
)

// lateTolerance is how late after its deadline a message may be reported
// on the real clock: it measures the scheduler of a loaded host (the tests
// run under -race beside other packages), not the producer, as in core's
// tests (the bug guarded against is a timeout that never fires).
const lateTolerance = 500 * time.Millisecond

// TestTCPBrokerRestartSameAddress is the Pulsar issue end to end: the broker
// goes away, more messages than MaxPending are sent and all time out on
// time; a broker comes back on the same address with the same store, and
// the producer reconnects by itself and delivers what is sent next, each
// success stored exactly once.
func TestTCPBrokerRestartSameAddress(t *testing.T) {
	store := broker.NewMemoryStore()
	b1, _ := broker.New(store)
	srv, err := server.New("127.0.0.1:0", b1)
	require.NoError(t, err)
	addr := srv.Addr().String()

	const maxPending, timeout = 50, 400 * time.Millisecond
	p, log := newProducer(t, addr, core.MaxPending(maxPending), core.MaxPendingPerTopic(maxPending), core.SendTimeout(timeout))
	_, err = p.Send(context.Background(), &core.Message{Payload: []byte("before")})
	require.NoError(t, err)

	require.NoError(t, srv.Close(context.Background()))

	type outcome struct {
		err    error
		called time.Time
		at     time.Time
	}
	const down = 2 * maxPending
	var mu sync.Mutex
	outcomes := make(map[int]*outcome)
	var wg sync.WaitGroup
	record := func(i int, err error) {
		mu.Lock()
		o := outcomes[i]
		o.err, o.at = err, time.Now()
		mu.Unlock()
		wg.Done()
	}
	send := func(i int) {
		mu.Lock()
		outcomes[i] = &outcome{called: time.Now()}
		mu.Unlock()
		wg.Add(1)
		err := p.SendAsync(context.Background(), &core.Message{Payload: []byte(fmt.Sprint(i))},
			func(_ core.MessageID, _ *core.Message, err error) { record(i, err) })
		if err != nil {
			record(i, err)
		}
	}
	for i := range down {
		send(i)
	}
	wg.Wait()
	for i := range down {
		o := outcomes[i]
		require.ErrorIs(t, o.err, core.ErrTimeout, "message %d", i)
		assert.False(t, o.at.After(o.called.Add(timeout+lateTolerance)), "message %d late by %v", i, o.at.Sub(o.called.Add(timeout)))
	}

	// Messages sent now are in the ring when the broker comes back.
	const up = maxPending
	for i := down; i < down+up; i++ {
		send(i)
	}
	b2, _ := broker.New(store)
	srv2, err := server.New(addr, b2)
	require.NoError(t, err)
	defer srv2.Close(context.Background())
	wg.Wait()

	successes := map[string]bool{"before": true}
	for i := down; i < down+up; i++ {
		if outcomes[i].err == nil {
			successes[fmt.Sprint(i)] = true
		}
	}
	if !assert.Len(t, successes, 1+up, "the producer reconnected and delivered while the messages were still in time") {
		t.Logf("first failure: %v; producer errors: %v", outcomes[down].err, log.Snapshot())
	}
	seen := map[string]bool{}
	for _, r := range store.Records(p.Name()) {
		require.False(t, seen[string(r.Payload)], "%q stored twice", r.Payload)
		seen[string(r.Payload)] = true
	}
	for s := range successes {
		assert.True(t, seen[s], "success %q missing from the store", s)
	}
	assert.Equal(t, len(successes), len(seen), "timed-out messages were never written")
}

// TestTCPHalfOpenDetected: peers that accept and then stay silent are
// detected, by the handshake timeout (no HELLO_OK) or by the heartbeat
// (HELLO_OK, then nothing), and the producer dials again. The peer that
// answers HELLO has a handshake timeout far beyond its answer: a short one
// there (60ms) was a race on a loaded host, whose peer goroutine could
// answer late and have the handshake timeout, not the heartbeat, end the
// connection.
func TestTCPHalfOpenDetected(t *testing.T) {
	for _, tc := range []struct {
		name       string
		answerable bool
		handshake  time.Duration
		want       error
	}{
		{"never answers", false, 60 * time.Millisecond, core.ErrHandshake},
		{"answers HELLO then goes silent", true, waitTimeout, core.ErrHeartbeat},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			var accepted atomic.Int64
			var wg sync.WaitGroup
			defer wg.Wait()
			defer ln.Close()
			wg.Go(func() {
				var conns []net.Conn
				defer func() {
					for _, c := range conns {
						c.Close()
					}
				}()
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					accepted.Add(1)
					conns = append(conns, c)
					wg.Go(func() { silentPeer(c, tc.answerable) })
				}
			})
			p, log := newProducer(t, ln.Addr().String(), core.Heartbeat(30*time.Millisecond), core.HandshakeTimeout(tc.handshake))
			require.NoError(t, p.SendAsync(context.Background(), &core.Message{Payload: []byte("x")}, func(core.MessageID, *core.Message, error) {}))
			waitUntil(t, "a second dial", func() bool { return accepted.Load() >= 2 })
			assert.True(t, log.Has(tc.want), "reported %v", log.Snapshot())
		})
	}
}

// silentPeer reads and discards; if answerable it first answers HELLO
// and the first TOPIC.
func silentPeer(c net.Conn, answerable bool) {
	if answerable {
		testkit.SilentHello(c)
	}
	_, _ = io.Copy(io.Discard, c)
}

// TestTCPManyProducersOneBroker: 64 producers share a broker while every
// connection is cut twice; each keeps its own order and dedup state.
func TestTCPManyProducersOneBroker(t *testing.T) {
	const producers, per = 64, 300
	var wg sync.WaitGroup
	results := make([][]int, producers)
	var mu sync.Mutex
	ps := make([]*core.Producer, producers)
	for i := range producers {
		ps[i], _ = newProducer(t, shared.server.Addr().String(), core.MaxPending(1024))
	}
	var sent atomic.Int64
	for i := range producers {
		wg.Go(func() {
			var cbs sync.WaitGroup
			for k := range per {
				cbs.Add(1)
				msg := &core.Message{Payload: binary.BigEndian.AppendUint32(nil, uint32(k))}
				err := ps[i].SendAsync(context.Background(), msg, func(_ core.MessageID, _ *core.Message, err error) {
					defer cbs.Done()
					if assert.NoError(t, err) {
						mu.Lock()
						results[i] = append(results[i], k)
						mu.Unlock()
					}
				})
				require.NoError(t, err)
				sent.Add(1)
			}
			cbs.Wait()
		})
	}
	for _, at := range []int64{producers * per / 3, 2 * producers * per / 3} {
		waitUntil(t, "sends to progress", func() bool { return sent.Load() >= at })
		shared.server.CloseConns()
	}
	wg.Wait()
	for i := range producers {
		require.Equal(t, per, len(results[i]), "producer %d", i)
		for k, v := range results[i] {
			require.Equal(t, k, v, "producer %d: success out of order", i)
		}
		recs := shared.store.Records(ps[i].Name())
		require.Equal(t, per, len(recs), "producer %d: stored exactly once", i)
		for k, r := range recs {
			require.Equal(t, uint32(k), binary.BigEndian.Uint32(r.Payload), "producer %d: stored out of order", i)
		}
	}
}

// TestTCPStalledReaderBoundsMemory: a broker that stops reading stops the
// producer's pump, not the client's memory (see
// testkit.StalledReaderBoundsMemory).
func TestTCPStalledReaderBoundsMemory(t *testing.T) {
	testkit.StalledReaderBoundsMemory(t, func(addr string, opts ...core.Option) *core.Producer {
		p, _ := newProducer(t, addr, opts...)
		return p
	})
}

func TestTCPOptions(t *testing.T) {
	_, err := tcp.NewDialer("no-port")
	assert.ErrorIs(t, err, tcp.ErrInvalidOption)
	_, err = tcp.NewDialer("127.0.0.1:1", tcp.ConnectTimeout(0))
	assert.ErrorIs(t, err, tcp.ErrInvalidOption)
	_, err = tcp.NewDialer("127.0.0.1:1", tcp.MaxInboundFrame(10))
	assert.ErrorIs(t, err, tcp.ErrInvalidOption)
}

func TestTCPDialerClosed(t *testing.T) {
	d, err := tcp.NewDialer(shared.server.Addr().String())
	require.NoError(t, err)
	require.NoError(t, d.Close())
	require.NoError(t, d.Close())
	_, err = d.Dial(context.Background(), nil)
	assert.ErrorIs(t, err, tcp.ErrDialerClosed)
}
