package testkit

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/inflightmq/inflight/wire"
)

// SilentHello reads frames from c until the first TOPIC, answering the
// HELLO with HELLO_OK and that TOPIC with TOPIC_OK (nothing stored), and
// returns: the producer may then write the topic's batches, which nobody
// reads.
func SilentHello(c net.Conn) {
	buf := make([]byte, 0, 512)
	tmp := make([]byte, 512)
	for {
		frame, n, err := wire.Split(buf, wire.DefaultMaxFrameSize)
		if err != nil {
			return
		}
		if frame == nil {
			k, err := c.Read(tmp)
			if err != nil {
				return
			}
			buf = append(buf, tmp[:k]...)
			continue
		}
		typ, _ := wire.TypeOf(frame)
		switch typ {
		case wire.TypeHello:
			_, _ = c.Write(wire.AppendHelloOK(nil, wire.HelloOK{MaxFrameSize: wire.DefaultMaxFrameSize, Epoch: 1}))
		case wire.TypeTopic:
			if d, err := wire.DecodeTopic(frame); err == nil {
				_, _ = c.Write(wire.AppendTopicOK(nil, wire.TopicOK{ID: d.ID}))
			}
			return
		}
		buf = buf[n:]
	}
}

// WaitChan waits for ch to yield a value or be closed, and returns the
// value, failing the test after 10 s.
func WaitChan[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// WaitUntil polls cond until it holds, failing the test after 10 s.
func WaitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// WaitGroup waits for wg, failing the test after 10 s (the goroutine that
// waits stays until wg is done).
func WaitGroup(t testing.TB, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	WaitChan(t, done, what)
}
