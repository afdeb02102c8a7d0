package inflight_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/testkit"
	"github.com/inflightmq/inflight/transport/tcp"
	"github.com/inflightmq/inflight/wire"
)

// TestMessageLimits sends a message just under and just over each limit:
// under is stored, over is refused by SendAsync with a wrapped sentinel and
// no callback. The topic limits are checked by core.New.
func TestMessageLimits(t *testing.T) {
	f := newMemFixture(t)
	defer f.Close()
	p := newProducer(t, f, core.MaxFrameSize(256<<10), core.MaxBatchBytes(256<<10))
	headers := func(n int) []core.Header {
		hs := make([]core.Header, n)
		for i := range hs {
			hs[i] = core.Header{Key: "h"}
		}
		return hs
	}
	max := p.MaxMessageSize()
	for _, tc := range []struct {
		name string
		msg  core.Message
		want error // nil: stored
	}{
		{"key at limit", core.Message{Key: make([]byte, wire.MaxKeyLen)}, nil},
		{"key over", core.Message{Key: make([]byte, wire.MaxKeyLen+1)}, core.ErrInvalidMessage},
		{"headers at limit", core.Message{Headers: headers(wire.MaxHeaders)}, nil},
		{"headers over", core.Message{Headers: headers(wire.MaxHeaders + 1)}, core.ErrInvalidMessage},
		{"header key at limit", core.Message{Headers: []core.Header{{Key: strings.Repeat("k", wire.MaxHeaderKeyLen)}}}, nil},
		{"header key over", core.Message{Headers: []core.Header{{Key: strings.Repeat("k", wire.MaxHeaderKeyLen+1)}}}, core.ErrInvalidMessage},
		{"header key empty", core.Message{Headers: []core.Header{{Value: []byte("v")}}}, core.ErrInvalidMessage},
		{"header value at limit", core.Message{Headers: []core.Header{{Key: "k", Value: make([]byte, wire.MaxHeaderValueLen)}}}, nil},
		{"header value over", core.Message{Headers: []core.Header{{Key: "k", Value: make([]byte, wire.MaxHeaderValueLen+1)}}}, core.ErrInvalidMessage},
		{"event time 2262", core.Message{EventTime: time.Date(2262, 4, 1, 0, 0, 0, 0, time.UTC)}, nil},
		{"event time 2263", core.Message{EventTime: time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC)}, core.ErrInvalidMessage},
		{"event time 1678", core.Message{EventTime: time.Date(1678, 1, 1, 0, 0, 0, 0, time.UTC)}, nil},
		{"event time 1677", core.Message{EventTime: time.Date(1677, 12, 31, 0, 0, 0, 0, time.UTC)}, core.ErrInvalidMessage},
		// The whole record: payload + key (2-byte length + key) within the frame.
		{"record at the frame limit", core.Message{Payload: make([]byte, max-2-1000), Key: make([]byte, 1000)}, nil},
		{"record over the frame limit", core.Message{Payload: make([]byte, max-2-1000+1), Key: make([]byte, 1000)}, core.ErrMessageTooLarge},
		{"payload alone over", core.Message{Payload: make([]byte, max+1)}, core.ErrMessageTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			called := make(chan error, 1)
			msg := tc.msg
			err := p.SendAsync(ctx, &msg, func(_ core.MessageID, _ *core.Message, err error) { called <- err })
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
				t.Log(err)
				select {
				case err := <-called:
					t.Fatalf("callback ran (%v) for a refused message", err)
				default:
				}
				return
			}
			require.NoError(t, err)
			select {
			case err := <-called:
				require.NoError(t, err)
			case <-ctx.Done():
				t.Fatal("no callback")
			}
		})
	}
	for _, topic := range []string{"", strings.Repeat("t", wire.MaxTopicLen+1), "a b", "orders.*"} {
		_, err := core.New(f.Dialer(), core.Topic(topic))
		assert.ErrorIs(t, err, core.ErrInvalidOption, "Topic(%q)", topic)
	}
	p2, err := core.New(f.Dialer(), core.Topic(strings.Repeat("t", wire.MaxTopicLen)))
	require.NoError(t, err)
	require.NoError(t, p2.Close(context.Background()))
}

// TestTopicsDeduplicateSeparately runs producers with one name on two
// topics, one after the other (the name's epoch is one across its topics:
// two live instances of it fence each other): each topic has its own
// sequence IDs from 1, and a restart on one topic continues that topic's
// IDs.
func TestTopicsDeduplicateSeparately(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			f := tr.new(t)
			defer f.Close()
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			for _, topic := range []string{"a", "b"} {
				p := newProducer(t, f, core.Topic(topic))
				for i := range 5 {
					id, err := p.Send(ctx, &core.Message{Payload: []byte{byte(i)}})
					require.NoError(t, err)
					assert.Equal(t, core.MessageID(i+1), id, "topic %s counts from 1", topic)
				}
				require.NoError(t, p.Close(ctx))
			}
			assert.Equal(t, 5, f.Store().TopicLen("a", "suite"))
			assert.Equal(t, 5, f.Store().TopicLen("b", "suite"))
			a2 := newProducer(t, f, core.Topic("a"))
			id, err := a2.Send(ctx, &core.Message{Payload: []byte("again")})
			require.NoError(t, err)
			assert.Equal(t, core.MessageID(6), id, "a new producer on topic a continues after a's last")
			assert.Equal(t, 6, f.Store().TopicLen("a", "suite"))
			assert.Equal(t, 5, f.Store().TopicLen("b", "suite"))
		})
	}
}

// v1Hello is a protocol version 1 HELLO, built by hand: u16 version 1, u32
// max frame size, u8 name length, name (no topic).
func v1Hello(name string) []byte {
	body := binary.BigEndian.AppendUint16(nil, 1)
	body = binary.BigEndian.AppendUint32(body, 1<<20)
	body = append(body, byte(len(name)))
	body = append(body, name...)
	f := binary.BigEndian.AppendUint32(nil, uint32(1+len(body)))
	return append(append(f, 1), body...)
}

// v2Hello is a HELLO as a version 2 producer (before epochs) sends it,
// built by hand: version, max frame, name, topic.
func v2Hello(name string) []byte {
	body := binary.BigEndian.AppendUint16(nil, 2)
	body = binary.BigEndian.AppendUint32(body, 1<<20)
	body = append(body, byte(len(name)))
	body = append(body, name...)
	body = append(body, byte(len(wire.DefaultTopic)))
	body = append(body, wire.DefaultTopic...)
	f := binary.BigEndian.AppendUint32(nil, uint32(1+len(body)))
	return append(append(f, 1), body...)
}

// v3Hello is a HELLO as a version 3 producer (one topic per connection,
// named in HELLO) sends it, built by hand: version, max frame, epoch,
// flags, name, topic.
func v3Hello(name string) []byte {
	body := binary.BigEndian.AppendUint16(nil, 3)
	body = binary.BigEndian.AppendUint32(body, 1<<20)
	body = binary.BigEndian.AppendUint64(body, 0)
	body = append(body, 0)
	body = append(body, byte(len(name)))
	body = append(body, name...)
	body = append(body, byte(len(wire.DefaultTopic)))
	body = append(body, wire.DefaultTopic...)
	f := binary.BigEndian.AppendUint32(nil, uint32(1+len(body)))
	return append(append(f, 1), body...)
}

// v1VersionError is the ERROR frame a version 1 broker answers a HELLO of
// this version with, built by hand: u16 code 8 (version), text.
func v1VersionError() []byte {
	text := fmt.Sprintf("inflight/broker: protocol violation: inflight/wire: unsupported protocol version: peer speaks %d, want 1", wire.Version)
	f := binary.BigEndian.AppendUint32(nil, uint32(1+2+len(text)))
	f = append(f, 5)
	f = binary.BigEndian.AppendUint16(f, 8)
	return append(f, text...)
}

// readFrame reads one frame from r.
func readFrame(r io.Reader) ([]byte, error) {
	var prefix [4]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(prefix[:])
	if n > 1<<20 {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	f := make([]byte, 4+n)
	copy(f, prefix[:])
	_, err := io.ReadFull(r, f[4:])
	return f, err
}

// TestProtocolVersionMismatch: a producer of version 1, 2 or 3 gets an
// ERROR of code version from this broker (in process and over TCP) that
// says which versions, and nothing stored; a
// producer of this version against a version 1 broker reports ErrHandshake
// wrapping the broker's version error, never sends a BATCH, and its
// messages fail by their deadline.
func TestProtocolVersionMismatch(t *testing.T) {
	checkVersionError := func(t *testing.T, reply []byte, peerVersion int) {
		t.Helper()
		e, err := wire.DecodeError(reply)
		require.NoError(t, err, "reply %x", reply)
		assert.Equal(t, wire.CodeVersion, e.Code)
		assert.Contains(t, e.Text, fmt.Sprintf("peer speaks %d, want %d", peerVersion, wire.Version))
	}
	// refusedOld hands a session the HELLO of an older producer and checks
	// the one frame it answers: an ERROR naming that version.
	refusedOld := func(t *testing.T, hello []byte, version int) (*broker.MemoryStore, []byte) {
		store := broker.NewMemoryStore()
		b, err := broker.New(store)
		require.NoError(t, err)
		peer := &capturePeer{}
		s := b.NewSession(peer)
		defer s.Close()
		err = s.Handle(hello)
		require.ErrorIs(t, err, wire.ErrVersion)
		require.ErrorIs(t, err, broker.ErrProtocol)
		require.Len(t, peer.sent(), 1)
		checkVersionError(t, peer.sent()[0], version)
		assert.Empty(t, store.Streams())
		return store, peer.sent()[0]
	}
	t.Run("v2 producer, session", func(t *testing.T) {
		// What a producer of the version before epochs meets: an ERROR of
		// code version, nothing stored, no name fenced.
		store, _ := refusedOld(t, v2Hello("old"), 2)
		st, err := store.State(wire.DefaultTopic, "old")
		require.NoError(t, err)
		assert.Zero(t, st)
	})
	t.Run("v1 producer, session", func(t *testing.T) {
		refusedOld(t, v1Hello("old"), 1)
	})
	t.Run("v3 producer, session", func(t *testing.T) {
		// A producer of one topic per connection: told to upgrade.
		store, answer := refusedOld(t, v3Hello("old"), 3)
		assert.Contains(t, string(answer), "upgrade the producer")
		st, err := store.State(wire.DefaultTopic, "old")
		require.NoError(t, err)
		assert.Zero(t, st, "no name fenced")
	})
	for _, tc := range []struct {
		version int
		hello   []byte
	}{{1, v1Hello("old")}, {3, v3Hello("old")}} {
		t.Run(fmt.Sprintf("v%d producer, tcp", tc.version), func(t *testing.T) {
			f := newTCPFixture(t).(*tcpFixture)
			defer f.Close()
			c, err := net.Dial("tcp", f.addr)
			require.NoError(t, err)
			defer c.Close()
			require.NoError(t, c.SetDeadline(time.Now().Add(waitTimeout)))
			_, err = c.Write(tc.hello)
			require.NoError(t, err)
			reply, err := readFrame(c)
			require.NoError(t, err)
			checkVersionError(t, reply, tc.version)
			_, err = readFrame(c)
			assert.Error(t, err, "the broker closes the connection after the ERROR")
		})
	}
	t.Run("v1 broker", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		var (
			mu    sync.Mutex
			types []wire.Type
			wg    sync.WaitGroup
		)
		wg.Add(1)
		go func() { // the version 1 broker: reads frames, answers HELLO with its version error
			defer wg.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_ = c.SetDeadline(time.Now().Add(waitTimeout))
				for {
					fr, err := readFrame(c)
					if err != nil {
						break
					}
					mu.Lock()
					types = append(types, wire.Type(fr[4]))
					mu.Unlock()
					if wire.Type(fr[4]) == wire.TypeHello {
						_, _ = c.Write(v1VersionError())
						break
					}
				}
				c.Close()
			}
		}()
		defer func() { ln.Close(); wg.Wait() }()

		d, err := tcp.NewDialer(ln.Addr().String())
		require.NoError(t, err)
		defer d.Close()
		errs := make(chan error, 64)
		p, err := core.New(d, core.SendTimeout(300*time.Millisecond), core.ReconnectBackoff(5*time.Millisecond, 20*time.Millisecond),
			core.ErrorHandler(func(err error) {
				select {
				case errs <- err:
				default:
				}
			}))
		require.NoError(t, err)
		var remote *wire.RemoteError
		select {
		case err := <-errs:
			require.ErrorIs(t, err, core.ErrHandshake)
			require.ErrorAs(t, err, &remote)
			assert.Equal(t, wire.CodeVersion, remote.Code)
			t.Log(err)
		case <-time.After(waitTimeout):
			t.Fatal("no error reported")
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		_, err = p.Send(ctx, &core.Message{Payload: []byte("never stored")})
		require.ErrorIs(t, err, core.ErrProtocolVersion, "failed at a refusal (MaxRefusals)")
		require.ErrorAs(t, err, &remote)
		assert.Equal(t, wire.CodeVersion, remote.Code)
		require.NoError(t, p.Close(ctx))
		mu.Lock()
		defer mu.Unlock()
		for _, typ := range types {
			assert.Equal(t, wire.TypeHello, typ, "only HELLOs reach a broker of another version")
		}
	})
}

// capturePeer keeps copies of the frames a session sends. The session
// sends from its own goroutines too (HELLO_OK, TOPIC_OK, receipts): read
// them with sent or wait.
type capturePeer struct {
	mu     sync.Mutex
	frames [][]byte
}

func (p *capturePeer) Send(f []byte) error {
	p.mu.Lock()
	p.frames = append(p.frames, bytes.Clone(f))
	p.mu.Unlock()
	return nil
}

func (p *capturePeer) Close() error { return nil }

// sent returns the frames sent so far.
func (p *capturePeer) sent() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.frames)
}

// wait waits until a frame of type typ was sent and returns it.
func (p *capturePeer) wait(t *testing.T, typ wire.Type) []byte {
	t.Helper()
	var found []byte
	testkit.WaitUntil(t, "a "+typ.String(), func() bool {
		for _, f := range p.sent() {
			if got, err := wire.TypeOf(f); err == nil && got == typ {
				found = f
				return true
			}
		}
		return false
	})
	return found
}
