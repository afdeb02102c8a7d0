package broker_test

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/wire"
)

const (
	aliceToken = "alice-secret-0123456789"
	bobToken   = "bob-secret-9876543210"
)

// testACL grants alice the till-* names, bob pos-1, both the name shared,
// the certificate "billing" the billing names; anonymous peers nothing.
func testACL(t testing.TB) *broker.ACL {
	t.Helper()
	acl, err := broker.ParseACL(strings.NewReader(fmt.Sprintf(`
# identity credential topics producers
alice   %s   orders,refunds  till-*,shared
bob     %s   orders          pos-1,shared   # a comment
billing cert:billing.example.com  invoices  billing
`, broker.TokenHash(aliceToken), broker.TokenHash(bobToken))))
	require.NoError(t, err)
	return acl
}

// certPeer is a fakePeer whose connection verified a client certificate.
type certPeer struct {
	*fakePeer
	cn string
}

func (p certPeer) VerifiedCertificates() []*x509.Certificate {
	return []*x509.Certificate{{Subject: pkix.Name{CommonName: p.cn}}}
}

func newCertConn(t testing.TB, b *broker.Broker, cn string) conn {
	p := &fakePeer{}
	c := conn{Session: b.NewSession(certPeer{p, cn}), peer: p}
	t.Cleanup(c.Close)
	return c
}

// helloAs sends a HELLO with token (none if "") for name and, if it was
// accepted, a TOPIC for topic as id 0. It returns the session's error and
// the last reply: an ERROR, a TOPIC_OK or a TOPIC_ERROR. A TOPIC_ERROR of
// code CodeUnauthorized (the topic alone refused; the connection goes on)
// comes with an error wrapping broker.ErrUnauthorized, so that callers
// tell a refusal from an acceptance as for HELLO.
func (c conn) helloAs(t testing.TB, token, topic, name string) ([]byte, error) {
	t.Helper()
	f, err := wire.AppendHello(nil, wire.Hello{Version: wire.Version, MaxFrameSize: wire.DefaultMaxFrameSize,
		Producer: name, Token: wire.Token(token)})
	require.NoError(t, err)
	reply, err := c.handle(t, f)
	if typ, _ := wire.TypeOf(reply); err != nil || typ != wire.TypeHelloOK {
		return reply, err
	}
	reply, err = c.handle(t, topicFrame(t, 0, topic))
	if e, derr := wire.DecodeTopicError(reply); derr == nil && e.Code == wire.CodeUnauthorized && err == nil {
		return reply, fmt.Errorf("%w: TOPIC_ERROR %q", broker.ErrUnauthorized, e.Text)
	}
	return reply, err
}

// refused sends a HELLO and TOPIC as helloAs does, asserts that one was
// refused with ErrUnauthorized and an ERROR or TOPIC_ERROR frame of code
// CodeUnauthorized, and returns the frame's text.
func (c conn) refused(t testing.TB, token, topic, name string) string {
	t.Helper()
	reply, err := c.helloAs(t, token, topic, name)
	require.ErrorIs(t, err, broker.ErrUnauthorized)
	if e, derr := wire.DecodeTopicError(reply); derr == nil {
		require.Equal(t, wire.CodeUnauthorized, e.Code)
		return e.Text
	}
	e := errorFrame(t, reply)
	require.Equal(t, wire.CodeUnauthorized, e.Code)
	return e.Text
}

func TestUnauthenticatedRefused(t *testing.T) {
	b, store := newBroker(t, broker.WithACL(testACL(t)))
	for _, tc := range []struct{ name, token string }{
		{"no token", ""},
		{"unknown token", "guess"},
		{"token of another length", aliceToken + "x"},
	} {
		c := newConn(t, b)
		text := c.refused(t, tc.token, "orders", "till-1")
		assert.NotContains(t, text, aliceToken, tc.name)
		c.Close()
	}
	c := newCertConn(t, b, "intruder")
	c.refused(t, "", "invoices", "billing")
	c.Close()

	assert.Equal(t, uint64(4), b.Stats().Unauthorized)
	assert.Empty(t, store.Streams())

	// The right credentials are accepted.
	ok := newConn(t, b)
	defer ok.Close()
	reply, err := ok.helloAs(t, aliceToken, "orders", "till-1")
	require.NoError(t, err)
	topicOK(t, reply)
	assert.Equal(t, broker.Identity{Name: "alice", Method: broker.MethodToken}, ok.Identity())
	cert := newCertConn(t, b, "billing.example.com")
	defer cert.Close()
	reply, err = cert.helloAs(t, "", "invoices", "billing")
	require.NoError(t, err)
	topicOK(t, reply)
	assert.Equal(t, "certificate billing", cert.Identity().String())
}

func TestIdentityCannotUseOthersName(t *testing.T) {
	var refusals []broker.Refusal
	b, _ := newBroker(t, broker.WithACL(testACL(t)), broker.OnRefused(func(r broker.Refusal) { refusals = append(refusals, r) }))
	for _, tc := range []struct{ token, topic, name string }{
		{bobToken, "orders", "till-1"},     // alice's name
		{bobToken, "refunds", "pos-1"},     // bob's name, alice's topic
		{aliceToken, "orders", "pos-1"},    // bob's name
		{aliceToken, "invoices", "till-1"}, // a topic alice may not write
	} {
		c := newConn(t, b)
		text := c.refused(t, tc.token, tc.topic, tc.name)
		assert.Contains(t, text, tc.name)
		c.Close()
	}
	require.Len(t, refusals, 4)
	assert.Equal(t, broker.Refusal{Identity: broker.Identity{Name: "bob", Method: broker.MethodToken},
		Producer: "till-1", Err: refusals[0].Err}, refusals[0]) // refused at HELLO: no topic
	assert.ErrorIs(t, refusals[0].Err, broker.ErrUnauthorized)

	// A certificate identity is held to its grants too.
	c := newCertConn(t, b, "billing.example.com")
	c.refused(t, "", "orders", "till-1")
	c.Close()
	assert.Equal(t, uint64(5), b.Stats().Unauthorized)
}

func TestNameTakeoverRefused(t *testing.T) {
	var refusals []broker.Refusal
	b, store := newBroker(t, broker.WithACL(testACL(t)), broker.OnRefused(func(r broker.Refusal) { refusals = append(refusals, r) }))
	a := newConn(t, b)
	defer a.Close()
	reply, err := a.helloAs(t, aliceToken, "orders", "shared")
	require.NoError(t, err)
	topicOK(t, reply)
	require.Equal(t, uint64(3), a.send(t, 0, 1, 3))

	// bob may use the name, but not while alice's session lives.
	bob := newConn(t, b)
	text := bob.refused(t, bobToken, "orders", "shared")
	bob.Close()
	assert.Contains(t, text, "another identity")
	assert.False(t, a.peer.closed(), "alice's session survives")
	assert.Equal(t, uint64(5), a.send(t, 0, 4, 2), "alice keeps storing")
	st := b.Stats()
	assert.Equal(t, uint64(1), st.TakeoversRefused)
	assert.Zero(t, st.Takeovers)
	require.Len(t, refusals, 1)
	require.NotNil(t, refusals[0].Holder)
	assert.Equal(t, "alice", refusals[0].Holder.Name)

	// The same identity reconnecting takes the name over, as before.
	a2 := newConn(t, b)
	defer a2.Close()
	reply, err = a2.helloAs(t, aliceToken, "orders", "shared")
	require.NoError(t, err)
	assert.Equal(t, uint64(5), topicOK(t, reply))
	assert.True(t, a.peer.closed())
	assert.Equal(t, uint64(1), b.Stats().Takeovers)

	// Once alice's sessions are gone, bob may use the name.
	a.Close()
	a2.Close()
	bob = newConn(t, b)
	defer bob.Close()
	reply, err = bob.helloAs(t, bobToken, "orders", "shared")
	require.NoError(t, err)
	assert.Equal(t, uint64(5), topicOK(t, reply))
	assert.Len(t, store.TopicRecords("orders", "shared"), 5)
}

// TestTakeoverWithoutAuth: without authentication every peer is anonymous,
// one identity: the newest session takes the name over, as it always did.
// Client certificates still tell identities apart.
func TestTakeoverWithoutAuth(t *testing.T) {
	b, _ := newBroker(t)
	a, c := newConn(t, b), newConn(t, b)
	defer a.Close()
	defer c.Close()
	a.hello(t, "p")
	c.hello(t, "p")
	assert.True(t, a.peer.closed())

	x, y := newCertConn(t, b, "x"), newCertConn(t, b, "y")
	defer x.Close()
	defer y.Close()
	_, err := x.helloAs(t, "ignored", dflt, "q")
	require.NoError(t, err)
	y.refused(t, "", dflt, "q")
	assert.Equal(t, uint64(1), b.Stats().TakeoversRefused)
}

func TestDefaultDeny(t *testing.T) {
	b, _ := newBroker(t, broker.Authenticate(func(broker.Credentials) (broker.Identity, error) {
		return broker.Identity{Name: "x", Method: broker.MethodToken}, nil
	}))
	c := newConn(t, b)
	defer c.Close()
	c.refused(t, "t", dflt, "p")

	b, _ = newBroker(t, broker.Authorize(func(id broker.Identity, topic, producer string) error {
		if id.Name == "" {
			return errors.New("anonymous")
		}
		return nil
	}))
	c = newConn(t, b)
	defer c.Close()
	text := c.refused(t, "", dflt, "p")
	assert.Contains(t, text, "anonymous")
}

func TestParseACLErrors(t *testing.T) {
	h := broker.TokenHash("t")
	for _, text := range []string{
		"",
		"# only a comment",
		"alice " + h + " orders",
		"alice " + h + " orders till-1 extra",
		"alice token-sha256:abcd orders till-1",
		"alice password:x orders till-1",
		"alice cert: orders till-1",
		"alice " + h + " or*ders till-1",
		"alice " + h + " orders ,",
		"alice " + h + " orders p\nbob " + h + " orders q",
		"alice cert:x orders p\nbob cert:x orders q",
		"alice anonymous orders p\nbob anonymous orders q",
	} {
		_, err := broker.ParseACL(strings.NewReader(text))
		assert.ErrorIs(t, err, broker.ErrACL, "%q", text)
	}
	_, err := broker.LoadACL("testdata/no-such-file")
	assert.ErrorIs(t, err, broker.ErrACL)
}

func TestACLPatterns(t *testing.T) {
	acl, err := broker.ParseACL(strings.NewReader("guest anonymous * web-*\nguest anonymous logs exact"))
	require.NoError(t, err)
	id, err := acl.Authenticate(broker.Credentials{})
	require.NoError(t, err)
	assert.Equal(t, broker.Identity{Name: "guest"}, id)
	assert.NoError(t, acl.Authorize(id, "any", "web-1"))
	assert.NoError(t, acl.Authorize(id, "logs", "exact"))
	assert.Error(t, acl.Authorize(id, "logs", "exact2"))
	assert.Error(t, acl.Authorize(id, "any", "we"))
	assert.Error(t, acl.Authorize(broker.Identity{Name: "other"}, "any", "web-1"))
}
