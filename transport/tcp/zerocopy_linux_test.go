package tcp_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/faultproxy"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/server"
	"github.com/inflightmq/inflight/wire"
)

// TestTCPZeroCopyFailedMessagesGiveTheirPayloadsBack is ZeroCopyMin end to
// end: large payloads go from the Messages' memory to the socket; with
// the broker's side stalled (a proxy that stops forwarding) the writer holds
// frames of them (13 MB written, beyond what the sockets take) when their
// messages fail (their context ends). Each callback overwrites its
// payload at once, as a caller may. When the broker reads again, every
// message is stored with its payload as it was sent: nothing read a
// payload after its callback ran.
func TestTCPZeroCopyFailedMessagesGiveTheirPayloadsBack(t *testing.T) {
	store, proxy := proxiedBroker(t)

	const size, n = 64 << 10, 200
	// A window that small frames cannot fill: the pump may write a frame
	// per few messages while SendAsync runs, and no receipt frees a
	// place while the proxy stalls.
	p, log := newProducer(t, proxy.Addr(), core.MaxFramesInFlight(256),
		core.MaxPendingBytes(1<<30), core.MaxPendingBytesPerTopic(1<<30), core.Heartbeat(time.Minute))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("producer: %+v; errors: %v", p.Stats(), log.Snapshot())
		}
	})
	_, err := p.Send(context.Background(), &core.Message{Payload: []byte("connected")})
	require.NoError(t, err)
	proxy.Stall(true)

	msgs := make([]*core.Message, n)
	for i := range msgs {
		msgs[i] = &core.Message{Payload: make([]byte, size)}
		fill(msgs[i].Payload, uint64(i))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var canceled atomic.Int64
	var cbs sync.WaitGroup
	cbs.Add(n)
	for _, m := range msgs {
		require.NoError(t, p.SendAsync(ctx, m, func(_ core.MessageID, m *core.Message, err error) {
			defer cbs.Done()
			if errors.Is(err, context.Canceled) {
				canceled.Add(1)
			}
			for i := range m.Payload {
				m.Payload[i] = 0xdd // the caller's again
			}
		}))
	}
	waitUntil(t, "every message to be written", func() bool { return p.Stats().Sent >= 1+n })
	cancel()
	testkit.WaitGroup(t, &cbs, "every callback")
	require.EqualValues(t, n, canceled.Load(), "the broker read nothing: every message failed")

	proxy.Stall(false)
	name := p.Name()
	waitUntil(t, "every message to be stored", func() bool { return store.Len(name) >= 1+n })
	recs := store.Records(name)
	require.Len(t, recs, 1+n, "every message stored once")
	for _, r := range recs[1:] {
		requireAsSent(t, r)
	}
}

// TestTCPZeroCopyThroughCuts: messages of 16 KiB written by reference
// through a proxy that cuts every connection every 30 ms and now and then
// stops forwarding for longer than SendTimeout, so that messages are
// resent (copied) and fail while their frames are held; each callback
// overwrites its payload and the Message is sent again at once with the
// next one. The broker never finds a frame whose payload changed after it
// was built (no checksum error reaches the producer), every stored record
// is a message as it was sent, and every success is stored.
func TestTCPZeroCopyThroughCuts(t *testing.T) {
	store, proxy := proxiedBroker(t)
	p, log := newProducer(t, proxy.Addr(), core.SendTimeout(200*time.Millisecond))

	const size, slots = 16 << 10, 2048 // 32 MiB: beyond the sockets, so the writer holds frames
	free := make(chan *core.Message, slots)
	for range slots {
		free <- &core.Message{Payload: make([]byte, size)}
	}
	var mu sync.Mutex
	acked := map[uint64]bool{}
	var timedOut atomic.Int64
	cb := func(_ core.MessageID, m *core.Message, err error) {
		idx := binary.BigEndian.Uint64(m.Payload)
		mu.Lock()
		if err == nil {
			acked[idx] = true
		} else if errors.Is(err, core.ErrTimeout) {
			timedOut.Add(1)
		}
		mu.Unlock()
		for i := range m.Payload {
			m.Payload[i] = 0xdd
		}
		free <- m
	}

	stop := make(chan struct{})
	var chaos sync.WaitGroup
	chaos.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(30 * time.Millisecond):
			}
			if i%10 == 5 {
				proxy.Stall(true) // longer than SendTimeout: frames held, messages fail
				select {
				case <-stop:
				case <-time.After(300 * time.Millisecond):
				}
				proxy.Stall(false)
				continue // what the writer held goes through before the next cut
			}
			proxy.Cut()
		}
	})
	end := time.Now().Add(1500 * time.Millisecond)
	for idx := uint64(1); time.Now().Before(end); idx++ {
		m := testkit.WaitChan(t, free, "a Message back from its callback")
		fill(m.Payload, idx)
		if err := p.SendAsync(context.Background(), m, cb); err != nil {
			// Waited for room past its deadline (the broker away): not
			// held, no callback.
			require.ErrorIs(t, err, core.ErrTimeout)
			free <- m
		}
	}
	close(stop)
	testkit.WaitGroup(t, &chaos, "the cutter")
	for range slots { // every callback ran
		testkit.WaitChan(t, free, "every callback")
	}

	var re *wire.RemoteError
	assert.Nil(t, log.Find(func(err error) bool { return errors.As(err, &re) && re.Code == wire.CodeChecksum }),
		"the broker found a frame whose payload changed after it was built")
	recs := store.Records(p.Name())
	stored := map[uint64]bool{}
	for _, r := range recs {
		stored[requireAsSent(t, r)] = true
	}
	mu.Lock()
	defer mu.Unlock()
	for idx := range acked {
		require.True(t, stored[idx], "success %d stored", idx)
	}
	t.Logf("%d stored, %d acknowledged, %d timed out", len(recs), len(acked), timedOut.Load())
	assert.NotEmpty(t, acked)
	assert.Positive(t, timedOut.Load(), "no message failed while its frame was held")
}

// proxiedBroker starts a broker on a memory store and a server for it,
// behind a fault proxy; all stop at the end of the test.
func proxiedBroker(t *testing.T) (*broker.MemoryStore, *faultproxy.Proxy) {
	t.Helper()
	store := broker.NewMemoryStore()
	b, _ := broker.New(store)
	srv, err := server.New("127.0.0.1:0", b)
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close(context.Background()) })
	proxy, err := faultproxy.New(srv.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { proxy.Close() })
	return store, proxy
}

// requireAsSent checks that r's payload is a message's as fill made it,
// and returns the message's index.
func requireAsSent(t *testing.T, r broker.Record) uint64 {
	t.Helper()
	idx := binary.BigEndian.Uint64(r.Payload)
	want := make([]byte, len(r.Payload))
	fill(want, idx)
	require.True(t, bytes.Equal(want, r.Payload), "record of seq %d: message %d as it was sent", r.Seq, idx)
	return idx
}

// fill writes message idx's payload into b: idx, then its low byte.
func fill(b []byte, idx uint64) {
	for i := range b {
		b[i] = byte(idx)
	}
	binary.BigEndian.PutUint64(b, idx)
}
