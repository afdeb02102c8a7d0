package core_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/wire"
)

// FuzzProducerInbound plays a hostile broker: whatever bytes it sends back
// (split into frames the way a transport would), the producer must not
// panic, must keep every message's callback promise, and must close.
func FuzzProducerInbound(f *testing.F) {
	ok := wire.AppendHelloOK(nil, wire.HelloOK{MaxFrameSize: wire.DefaultMaxFrameSize, Epoch: 1})
	topicOK := func(last uint64) []byte { return wire.AppendTopicOK(nil, wire.TopicOK{ID: 1, LastSeq: last}) }
	f.Add(append(append(ok, topicOK(0)...), wire.AppendReceipt(nil, wire.Receipt{Topic: 1, Seq: 1})...))
	f.Add(append(ok, wire.AppendReceipt(nil, wire.Receipt{Topic: 1, Seq: 1 << 40})...))
	f.Add(append(ok, topicOK(99)...))
	f.Add(append(ok, wire.AppendTopicError(nil, wire.TopicError{ID: 1, Code: wire.CodeUnauthorized, Text: "no"})...))
	f.Add(append(ok, wire.AppendReceipts(nil, []wire.Receipt{{Topic: 1, Seq: 1}, {Topic: 2, Seq: 5}})...))
	f.Add(append(ok, wire.AppendError(nil, wire.Error{Code: wire.CodeStore, Text: "disk"})...))
	f.Add(append(append(ok, ok...), wire.AppendPong(nil, wire.Pong{Nonce: 3})...))
	f.Add([]byte{0, 0, 0, 1, 99})
	f.Add(append(ok, wire.AppendError(nil, wire.Error{Code: wire.CodeFenced, Text: "epoch 2 took the name over"})...))
	f.Add(wire.AppendError(nil, wire.Error{Code: wire.CodeNameInUse}))
	f.Add(append(wire.AppendHelloOK(nil, wire.HelloOK{MaxFrameSize: wire.MinMaxFrameSize, Epoch: 3}), topicOK(wire.MaxSeq)...))
	f.Add(append(append(wire.AppendHelloOK(nil, wire.HelloOK{MaxFrameSize: wire.MinMaxFrameSize, Epoch: 1}), topicOK(wire.MaxSeq-2)...),
		wire.AppendReceipt(nil, wire.Receipt{Topic: 1, Seq: wire.MaxSeq})...))
	f.Fuzz(func(t *testing.T, reply []byte) {
		d := &scriptedDialer{reply: reply}
		p, err := core.New(d, core.SendTimeout(50*time.Millisecond), core.HandshakeTimeout(20*time.Millisecond),
			core.ReconnectBackoff(time.Millisecond, 2*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		calls, accepted := 0, 0
		for range 5 {
			err := p.SendAsync(context.Background(), &core.Message{Payload: []byte("m")}, func(core.MessageID, *core.Message, error) {
				mu.Lock()
				calls++
				mu.Unlock()
			})
			switch {
			case err == nil:
				accepted++
			case errors.Is(err, core.ErrFenced):
				// The broker's reply fenced the producer before this send
				// (the pump connects as soon as New returns): refused, so
				// no callback.
			default:
				t.Fatal(err)
			}
		}
		testkit.CloseProducer(t, p, 200*time.Millisecond)
		if calls != accepted {
			t.Fatalf("%d callbacks for %d messages accepted", calls, accepted)
		}
	})
}

// scriptedDialer answers the producer's first frame on each connection
// with reply, cut into frames as a transport would; the rest of reply, if
// it does not split into whole frames, is delivered as one last frame.
type scriptedDialer struct{ reply []byte }

func (d *scriptedDialer) Dial(_ context.Context, h transport.Handler) (transport.Conn, error) {
	return &scriptedConn{reply: d.reply, h: h}, nil
}

type scriptedConn struct {
	mu     sync.Mutex
	reply  []byte
	h      transport.Handler
	sent   bool
	closed bool
}

func (c *scriptedConn) WriteFrame(buf *transport.Buffer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return transport.ErrClosed
	}
	buf.Release()
	if c.sent {
		return nil
	}
	c.sent = true
	rest := c.reply
	for len(rest) > 0 {
		frame, n, err := wire.Split(rest, wire.DefaultMaxFrameSize)
		if err != nil || frame == nil {
			c.h.OnFrame(rest)
			break
		}
		c.h.OnFrame(frame)
		rest = rest[n:]
	}
	return nil
}

func (c *scriptedConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		c.h.OnClose(nil)
	}
	return nil
}
