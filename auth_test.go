package inflight_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/internal/testcert"
	"github.com/inflightmq/inflight/server"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/transport/mem"
	"github.com/inflightmq/inflight/transport/stdnet"
	"github.com/inflightmq/inflight/wire"
)

// Tokens of the identities of the auth tests; "intruder" has one the
// broker does not know.
var authTokens = map[string]string{
	"alice":    "alice-0f3a9c1e8b7d6a5f4e3d2c1b",
	"bob":      "bob-7e6d5c4b3a291807f6e5d4c3",
	"intruder": "intruder-1234567890abcdef",
}

// authACL: alice writes the till-* names, bob the pos-* names, both the
// name shared, on topic orders; by token or by a client certificate named
// after them. Anonymous peers may do nothing.
func authACL(t *testing.T) *broker.ACL {
	var b strings.Builder
	for _, who := range []string{"alice", "bob"} {
		names := map[string]string{"alice": "till-*,shared", "bob": "pos-*,shared"}[who]
		fmt.Fprintf(&b, "%s %s orders %s\n", who, broker.TokenHash(authTokens[who]), names)
		fmt.Fprintf(&b, "%s cert:%s orders %s\n", who, who, names)
	}
	acl, err := broker.ParseACL(strings.NewReader(b.String()))
	require.NoError(t, err)
	return acl
}

// authNet is a broker with an access list behind one transport, and how a
// producer there proves who it is: "" presents nothing.
type authNet struct {
	name   string
	store  *broker.MemoryStore
	broker *broker.Broker
	// connect returns the dialer and options of a producer that is who.
	connect func(t *testing.T, who string) (transport.Dialer, []core.Option)
}

var authNets = []struct {
	name string
	new  func(t *testing.T, opts ...broker.Option) authNet
}{
	{"mem-token", newMemAuthNet},
	{"stdnet-mtls", newCertAuthNet},
}

func newAuthBroker(t *testing.T, opts ...broker.Option) (*broker.MemoryStore, *broker.Broker) {
	store := broker.NewMemoryStore()
	b, err := broker.New(store, append([]broker.Option{broker.WithACL(authACL(t))}, opts...)...)
	require.NoError(t, err)
	return store, b
}

// newMemAuthNet: producers prove who they are with a token.
func newMemAuthNet(t *testing.T, opts ...broker.Option) authNet {
	store, b := newAuthBroker(t, opts...)
	d := mem.NewDialer(b)
	t.Cleanup(func() { d.Close() })
	return authNet{name: "mem-token", store: store, broker: b,
		connect: func(t *testing.T, who string) (transport.Dialer, []core.Option) {
			if who == "" {
				return d, nil
			}
			return d, []core.Option{core.Token(authTokens[who])}
		}}
}

// newCertAuthNet: producers prove who they are with a client certificate
// (stdnet, TLS, client certificates verified if given).
func newCertAuthNet(t *testing.T, opts ...broker.Option) authNet {
	store, b := newAuthBroker(t, opts...)
	ca, err := testcert.NewCA(t.Name())
	require.NoError(t, err)
	cfg, err := ca.ServerConfig()
	require.NoError(t, err)
	cfg.ClientAuth, cfg.ClientCAs = tls.VerifyClientCertIfGiven, ca.Pool
	srv, err := server.New("127.0.0.1:0", b, server.TLS(cfg))
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close(context.Background()) })
	return authNet{name: "stdnet-mtls", store: store, broker: b,
		connect: func(t *testing.T, who string) (transport.Dialer, []core.Option) {
			cfg := ca.ClientConfig()
			if who != "" {
				cert, err := ca.Client(who)
				require.NoError(t, err)
				cfg.Certificates = []tls.Certificate{cert}
			}
			d, err := stdnet.NewDialer(srv.Addr().String(), stdnet.ClientTLS(cfg))
			require.NoError(t, err)
			t.Cleanup(func() { d.Close() })
			return d, nil
		}}
}

// errLog collects what a producer reports to its ErrorHandler.
type errLog struct {
	mu           sync.Mutex
	errs         []error
	unauthorized chan error
}

func (l *errLog) handle(err error) {
	l.mu.Lock()
	l.errs = append(l.errs, err)
	l.mu.Unlock()
	if errors.Is(err, core.ErrUnauthorized) {
		select {
		case l.unauthorized <- err:
		default:
		}
	}
}

func (l *errLog) all() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]error(nil), l.errs...)
}

// waitUnauthorized waits for n ErrUnauthorized reports, each with the
// broker's ERROR of code CodeUnauthorized, and returns the first.
func (l *errLog) waitUnauthorized(t *testing.T, n int) error {
	t.Helper()
	var first error
	for i := range n {
		select {
		case err := <-l.unauthorized:
			var re *wire.RemoteError
			require.ErrorAs(t, err, &re)
			require.Equal(t, wire.CodeUnauthorized, re.Code)
			if i == 0 {
				first = err
			}
		case <-time.After(waitTimeout):
			t.Fatalf("%d of %d ErrUnauthorized reports after %v; reports: %v", i, n, waitTimeout, l.all())
		}
	}
	return first
}

// authProducer starts a producer that is who, writing topic orders as name.
func authProducer(t *testing.T, n authNet, who, name string, opts ...core.Option) (*core.Producer, *errLog) {
	t.Helper()
	d, creds := n.connect(t, who)
	l := &errLog{unauthorized: make(chan error, 64)}
	opts = append(append([]core.Option{core.Name(name), core.Topic("orders"), core.ErrorHandler(l.handle),
		core.ReconnectBackoff(2*time.Millisecond, 20*time.Millisecond)}, creds...), opts...)
	p, err := core.New(d, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		require.NoError(t, p.Close(ctx))
	})
	return p, l
}

// sendOK sends n messages and requires each to succeed.
func sendOK(t *testing.T, p *core.Producer, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for i := range n {
		_, err := p.Send(ctx, &core.Message{Payload: fmt.Appendf(nil, "m%d", i)})
		require.NoError(t, err)
	}
}

// TestUnauthenticatedRefused: a producer without credentials, or with
// credentials the broker does not know, is refused at every HELLO; it
// reports core.ErrUnauthorized, keeps redialing, and its messages fail with
// the refusal (see TestRefusalNamedInCallbackError). Nothing it sent is
// stored.
func TestUnauthenticatedRefused(t *testing.T) {
	for _, an := range authNets {
		t.Run(an.name, func(t *testing.T) {
			n := an.new(t)
			for _, who := range []string{"", "intruder"} {
				p, l := authProducer(t, n, who, "till-1", core.SendTimeout(time.Minute))
				tl := newTally()
				for i := range 3 {
					tl.send(t, p, i)
				}
				l.waitUnauthorized(t, 2) // refused, and redialed
				tl.wait(t)
				for i, err := range tl.outcomes {
					require.ErrorIs(t, err, core.ErrUnauthorized, "message %d", i)
				}
			}
			assert.Empty(t, n.store.Streams(), "nothing stored")
			assert.GreaterOrEqual(t, n.broker.Stats().Unauthorized, uint64(4))

			p, l := authProducer(t, n, "alice", "till-1")
			sendOK(t, p, 3)
			assert.Len(t, n.store.TopicRecords("orders", "till-1"), 3)
			assert.Empty(t, l.all())
		})
	}
}

// TestIdentityCannotUseOthersName: an identity may write only the producer
// names its grants name.
func TestIdentityCannotUseOthersName(t *testing.T) {
	for _, an := range authNets {
		t.Run(an.name, func(t *testing.T) {
			n := an.new(t)
			_, bobAsAlice := authProducer(t, n, "bob", "till-1")
			err := bobAsAlice.waitUnauthorized(t, 2)
			assert.Contains(t, err.Error(), `may not write as producer "till-1"`) // on no topic: the HELLO is refused
			_, aliceAsBob := authProducer(t, n, "alice", "pos-1")
			aliceAsBob.waitUnauthorized(t, 1)

			bob, l := authProducer(t, n, "bob", "pos-1")
			sendOK(t, bob, 2)
			assert.Empty(t, l.all())
			assert.Empty(t, n.store.TopicRecords("orders", "till-1"))
		})
	}
}

// TestNameTakeoverRefused: while alice's producer is connected, bob (who
// may use the name too) cannot take it over: bob is refused, counted and
// reported through OnRefused; alice keeps storing and sees no error.
func TestNameTakeoverRefused(t *testing.T) {
	for _, an := range authNets {
		t.Run(an.name, func(t *testing.T) {
			refusals := make(chan broker.Refusal, 64)
			n := an.new(t, broker.OnRefused(func(r broker.Refusal) {
				select {
				case refusals <- r:
				default:
				}
			}))
			alice, aliceLog := authProducer(t, n, "alice", "shared")
			sendOK(t, alice, 10)

			_, bobLog := authProducer(t, n, "bob", "shared")
			err := bobLog.waitUnauthorized(t, 3)
			assert.Contains(t, err.Error(), "held by a live session of another identity")
			r := <-refusals
			assert.Equal(t, "bob", r.Identity.Name)
			require.NotNil(t, r.Holder)
			assert.Equal(t, "alice", r.Holder.Name)

			sendOK(t, alice, 10)
			assert.Empty(t, aliceLog.all(), "alice saw no error (no takeover, no sequence conflict)")
			assert.Len(t, n.store.TopicRecords("orders", "shared"), 20)
			st := n.broker.Stats()
			assert.GreaterOrEqual(t, st.TakeoversRefused, uint64(3))
			assert.Zero(t, st.Takeovers)
		})
	}
}

// TestTokenNeverLogged: tokens, right and wrong, go through HELLOs over mem
// and TLS, refusals, reconnects; every log line, ErrorHandler error, refusal,
// credentials the broker was given, and every Stats value, printed every
// way, holds neither token.
func TestTokenNeverLogged(t *testing.T) {
	var out bytes.Buffer
	var mu sync.Mutex
	printf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(&out, format+"\n", args...)
	}
	logged := &lockedWriter{mu: &mu, w: &out}
	oldLog, oldFlags := log.Writer(), log.Flags()
	oldSlog := slog.Default()
	log.SetOutput(logged)
	slog.SetDefault(slog.New(slog.NewTextHandler(logged, nil)))
	defer func() { log.SetOutput(oldLog); log.SetFlags(oldFlags); slog.SetDefault(oldSlog) }()

	right, wrong := authTokens["alice"], authTokens["alice"]+"-wrong"
	acl := authACL(t)
	authn := func(c broker.Credentials) (broker.Identity, error) {
		printf("credentials %v %+v %#v %s", c, c, c, c.Token)
		log.Printf("credentials %v", c)
		slog.Info("credentials", "creds", c, "token", c.Token)
		id, err := acl.Authenticate(c)
		printf("authenticate: %v %+v %v", id, id, err)
		return id, err
	}
	refused := func(r broker.Refusal) {
		printf("refused %v %+v %#v", r, r, r)
		slog.Warn("refused", "refusal", r, "err", r.Err)
	}
	onErr := func(err error) {
		printf("producer: %v %+v", err, err)
		log.Print(err)
	}

	store := broker.NewMemoryStore()
	b, err := broker.New(store, broker.Authenticate(authn), broker.Authorize(acl.Authorize), broker.OnRefused(refused))
	require.NoError(t, err)
	md := mem.NewDialer(b)
	defer md.Close()
	ca, err := testcert.NewCA(t.Name())
	require.NoError(t, err)
	cfg, err := ca.ServerConfig()
	require.NoError(t, err)
	srv, err := server.New("127.0.0.1:0", b, server.TLS(cfg))
	require.NoError(t, err)
	defer srv.Close(context.Background())
	sd, err := stdnet.NewDialer(srv.Addr().String(), stdnet.ClientTLS(ca.ClientConfig()))
	require.NoError(t, err)
	defer sd.Close()

	var closed []*core.Producer
	for _, d := range []transport.Dialer{md, sd} {
		for _, tok := range []string{wrong, right} {
			opt := core.Token(tok)
			printf("option %v %+v %#v", opt, opt, opt)
			l := &errLog{unauthorized: make(chan error, 64)}
			p, err := core.New(d, core.Name("till-1"), core.Topic("orders"), opt,
				core.ErrorHandler(func(err error) { onErr(err); l.handle(err) }),
				core.ReconnectBackoff(2*time.Millisecond, 20*time.Millisecond), core.SendTimeout(time.Second))
			require.NoError(t, err)
			if tok == wrong {
				l.waitUnauthorized(t, 2)
			} else {
				sendOK(t, p, 2)
			}
			printf("producer stats %+v", p.Stats())
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			require.NoError(t, p.Close(ctx))
			cancel()
			closed = append(closed, p)
		}
	}
	// A closed producer is printed whole once the dialers are closed too:
	// a transport's reader goroutine, the dialer's, may still be inside
	// the session's OnFrame (a receipt read before the close) when Close
	// returns, and it touches the producer (it kicks the pump). Closing
	// the dialers waits for those goroutines.
	require.NoError(t, md.Close())
	require.NoError(t, sd.Close())
	for _, p := range closed {
		printf("closed producer %v %+v", p, p)
	}
	printf("broker %+v server %+v", b.Stats(), srv.Stats())

	mu.Lock()
	defer mu.Unlock()
	s := out.String()
	require.Contains(t, s, "token not accepted", "the capture saw the refusals")
	require.Contains(t, s, wire.Redacted, "the capture saw the tokens, redacted")
	for _, line := range strings.Split(s, "\n") {
		for _, tok := range []string{right, wrong} {
			if strings.Contains(line, tok) {
				t.Errorf("a token was printed: %s", line)
			}
		}
	}
	require.GreaterOrEqual(t, b.Stats().Unauthorized, uint64(4), "two refusals per wrong token")
}

// lockedWriter serializes writes to w with mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestRefusalNamedInCallbackError: a producer the access list refuses
// hears why in its callbacks. By default (core.DefaultMaxRefusals) its
// messages fail with the refusal at the third one, long before their
// SendTimeout; with MaxRefusals(0) they time out, and the timeout names the
// refusal. Either way the text gives the broker's reason once, without a
// repeated prefix, and errors.Is and errors.As find every cause.
func TestRefusalNamedInCallbackError(t *testing.T) {
	reasons := map[string]string{ // why the broker refuses the intruder
		"mem-token":   "token not accepted",
		"stdnet-mtls": `certificate "intruder" not in the access list`,
	}
	for _, an := range authNets {
		t.Run(an.name, func(t *testing.T) {
			n := an.new(t)
			reason := reasons[an.name]
			require.NotEmpty(t, reason)

			t.Run("fails at the third refusal", func(t *testing.T) {
				p, l := authProducer(t, n, "intruder", "till-1", core.SendTimeout(time.Minute))
				tl := newTally()
				for i := range 3 {
					tl.send(t, p, i)
				}
				tl.wait(t) // within waitTimeout, far below SendTimeout
				assert.GreaterOrEqual(t, len(l.all()), core.DefaultMaxRefusals, "refusals before the messages failed")
				for i, err := range tl.outcomes {
					require.ErrorIs(t, err, core.ErrUnauthorized, "message %d", i)
					assert.NotErrorIs(t, err, core.ErrTimeout, "message %d", i)
					var re *wire.RemoteError
					require.ErrorAs(t, err, &re)
					assert.Equal(t, wire.CodeUnauthorized, re.Code)
					assert.Equal(t, "inflight: not authorized by the broker: "+reason, err.Error())
				}
			})
			t.Run("MaxRefusals(0): the timeout names the refusal", func(t *testing.T) {
				p, l := authProducer(t, n, "intruder", "till-2", core.SendTimeout(300*time.Millisecond), core.MaxRefusals(0))
				// The messages go once a refusal came: a timeout names the
				// last connection failure, and on a loaded host the first
				// attempt (a TLS handshake under -race) could outlast
				// SendTimeout, leaving none to name.
				l.waitUnauthorized(t, 1)
				tl := newTally()
				for i := range 3 {
					tl.send(t, p, i)
				}
				tl.wait(t)
				for i, err := range tl.outcomes {
					require.ErrorIs(t, err, core.ErrTimeout, "message %d", i)
					require.ErrorIs(t, err, core.ErrUnauthorized, "message %d", i)
					assert.Equal(t, "inflight: send timed out; last connection failure: handshake failed: not authorized by the broker: "+reason, err.Error())
				}
			})
			t.Run("the ErrorHandler's report reads once", func(t *testing.T) {
				_, l := authProducer(t, n, "intruder", "till-3")
				err := l.waitUnauthorized(t, 1)
				assert.Equal(t, "inflight: handshake failed: not authorized by the broker: "+reason, err.Error())
			})
		})
	}
}
