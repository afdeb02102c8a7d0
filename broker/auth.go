package broker

import (
	"crypto/x509"
	"fmt"

	"github.com/inflightmq/inflight/wire"
)

// Method is how a session's peer proved its identity.
type Method uint8

// Methods of authentication.
const (
	MethodNone        Method = iota // nothing proved: anonymous
	MethodToken                     // a token in HELLO
	MethodCertificate               // a client certificate verified by mutual TLS
)

var methodNames = [...]string{MethodNone: "anonymous", MethodToken: "token", MethodCertificate: "certificate"}

// String returns "anonymous", "token" or "certificate".
func (m Method) String() string {
	if int(m) < len(methodNames) {
		return methodNames[m]
	}
	return fmt.Sprintf("Method(%d)", m)
}

// Identity is who a session's peer is. Two sessions have the same identity
// when their Names are equal, however each proved it: only the same
// identity may take over a producer name from a live session. The zero
// Identity is anonymous: a broker without authentication sees every peer
// without a client certificate as the zero Identity, so any of them may
// take over any name, as before identities existed.
type Identity struct {
	Name   string // "" for anonymous
	Method Method // how it was proved
}

// String returns "anonymous" or "<method> <name>", such as
// "certificate billing".
func (id Identity) String() string {
	if id.Name == "" {
		return "anonymous"
	}
	return id.Method.String() + " " + id.Name
}

// Credentials is what a peer presents when it says HELLO. It prints
// without the token (see wire.Token).
type Credentials struct {
	// Token is the HELLO's token, empty if it has none.
	Token wire.Token
	// Certificates is the client certificate chain the transport verified
	// (leaf first, up to a root the server trusts), nil without mutual
	// TLS. Only verified chains are given: an unverified certificate
	// proves nothing.
	Certificates []*x509.Certificate
}

// CertificatePeer is a Peer that can tell which client certificate its
// connection verified. A transport's Peer implements it when it offers
// mutual TLS (transport/stdnet's does); the session asks it when HELLO
// arrives.
type CertificatePeer interface {
	Peer
	// VerifiedCertificates returns the verified client certificate chain,
	// leaf first, or nil if the peer presented none or none was verified.
	VerifiedCertificates() []*x509.Certificate
}

// Authenticate sets how the broker turns a HELLO's Credentials into an
// Identity (default: the Subject common name of a verified client
// certificate, with MethodCertificate; anonymous without one; a token is
// ignored). fn returns an error to refuse the HELLO: the producer gets an
// ERROR frame of code wire.CodeUnauthorized with the error's text (so the
// text must not contain the token) and Session.Handle returns
// ErrUnauthorized. fn runs on the session's goroutine (a transport's read
// loop, possibly an event loop shared by many connections) and must be
// fast; compare tokens in constant time (ACL.Authenticate does).
//
// Giving Authenticate or Authorize turns authorization on, and with it
// default deny: a broker given Authenticate and not Authorize refuses
// every HELLO.
func Authenticate(fn func(Credentials) (Identity, error)) Option {
	return optionFunc(func(c *config) error {
		if fn == nil {
			return fmt.Errorf("%w: nil Authenticate", ErrInvalidOption)
		}
		c.authenticate, c.auth = fn, true
		return nil
	})
}

// Authorize sets what an identity may do: fn returns nil if id may write
// topic as producer, an error to refuse. The broker asks it at HELLO with
// topic "" (may id use the producer name on any topic? The holder of a name
// fences its other incarnations on every topic: refuse it to whoever may
// write none of them), refusing the HELLO as for Authenticate, whose doc
// says what the producer sees; and at each TOPIC with its topic, refusing
// that topic alone with a TOPIC_ERROR of code wire.CodeUnauthorized (the
// connection goes on). Without Authorize, a broker given Authenticate
// refuses every HELLO; a broker given neither refuses none. fn runs on the
// connection's reader and must be fast.
func Authorize(fn func(id Identity, topic, producer string) error) Option {
	return optionFunc(func(c *config) error {
		if fn == nil {
			return fmt.Errorf("%w: nil Authorize", ErrInvalidOption)
		}
		c.authorize, c.auth = fn, true
		return nil
	})
}

// WithACL authenticates and authorizes with acl: Authenticate(acl.Authenticate)
// and Authorize(acl.Authorize).
func WithACL(acl *ACL) Option {
	return optionFunc(func(c *config) error {
		if acl == nil {
			return fmt.Errorf("%w: nil ACL", ErrInvalidOption)
		}
		c.authenticate, c.authorize, c.auth = acl.Authenticate, acl.Authorize, true
		return nil
	})
}

// Refusal describes a HELLO or a TOPIC the broker refused for its
// identity (see OnRefused). It holds no token.
type Refusal struct {
	Identity Identity // who asked (anonymous if authentication failed)
	Topic    string   // the TOPIC's topic; "" for a HELLO
	Producer string
	// Holder is set when the name is held by a live session of another
	// identity (a takeover refused): that session's identity.
	Holder *Identity
	Err    error // why; wraps ErrUnauthorized
}

// OnRefused sets a function the broker calls for every HELLO or TOPIC it
// refuses with wire.CodeUnauthorized, for logging (default: none; the
// refusals are counted in Stats either way). fn runs on the refused
// session's reader, or for a HELLO refused because another identity holds
// the name on the session's HELLO goroutine, and must not block.
func OnRefused(fn func(Refusal)) Option {
	return optionFunc(func(c *config) error {
		c.onRefused = fn
		return nil
	})
}

// credentials gathers what the peer presents with HELLO h.
func credentials(p Peer, h *wire.Hello) Credentials {
	c := Credentials{Token: h.Token}
	if cp, ok := p.(CertificatePeer); ok {
		c.Certificates = cp.VerifiedCertificates()
	}
	return c
}

// defaultIdentity is the identity without an Authenticate option.
func defaultIdentity(c Credentials) (Identity, error) {
	if len(c.Certificates) == 0 {
		return Identity{}, nil
	}
	return Identity{Name: certName(c.Certificates[0]), Method: MethodCertificate}, nil
}

// certName is the name a certificate proves: its Subject common name, or
// else its first DNS name, its first URI.
func certName(c *x509.Certificate) string {
	switch {
	case c.Subject.CommonName != "":
		return c.Subject.CommonName
	case len(c.DNSNames) > 0:
		return c.DNSNames[0]
	case len(c.URIs) > 0:
		return c.URIs[0].String()
	}
	return ""
}

// identify returns who the peer of HELLO h is and whether it may use h's
// producer name at all: Authorize with topic "" (see Authorize).
func (b *Broker) identify(p Peer, h *wire.Hello) (Identity, error) {
	authn := b.cfg.authenticate
	if authn == nil {
		authn = defaultIdentity
	}
	id, err := authn(credentials(p, h))
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %w", ErrUnauthorized, err)
	}
	return id, b.authorize(id, "", h.Producer)
}

// authorize returns nil if id may write topic as producer (topic "": may
// use the name on some topic), else an error wrapping ErrUnauthorized.
func (b *Broker) authorize(id Identity, topic, producer string) error {
	if !b.cfg.auth {
		return nil
	}
	if b.cfg.authorize == nil {
		return fmt.Errorf("%w: %v may not write as producer %q (no Authorize: everything is denied)", ErrUnauthorized, id, producer)
	}
	if err := b.cfg.authorize(id, topic, producer); err != nil {
		return fmt.Errorf("%w: %w", ErrUnauthorized, err)
	}
	return nil
}
