package testkit

import (
	"net"
	"testing"
	"time"

	"github.com/inflightmq/inflight/wire"
)

// SilentHello reads a HELLO from c, answers it, and returns.
func SilentHello(c net.Conn) {
	buf := make([]byte, 0, 512)
	tmp := make([]byte, 512)
	for {
		frame, _, err := wire.Split(buf, wire.DefaultMaxFrameSize)
		if err != nil || frame != nil {
			break
		}
		n, err := c.Read(tmp)
		if err != nil {
			return
		}
		buf = append(buf, tmp[:n]...)
	}
	_, _ = c.Write(wire.AppendHelloOK(nil, wire.HelloOK{MaxFrameSize: wire.DefaultMaxFrameSize, Epoch: 1}))
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
