package broker

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
)

// ACL is an access list: the identities a broker knows, the credential each
// proves itself with, and the topics and producer names each may use. Pass
// it to WithACL. It is read-only once made, so safe for concurrent use.
//
// Its text form, one grant a line, four fields separated by spaces, # for
// comments:
//
//	# identity  credential               topics          producer names
//	alice       token-sha256:9f86d081... orders,refunds  till-*
//	billing     cert:billing.example.com invoices        billing
//	guest       anonymous                public          *
//
// Credentials: token-sha256:HEX, the SHA-256 of a token in hex (print it
// with `printf %s "$TOKEN" | sha256sum`; the file holds no token); cert:NAME,
// a client certificate verified by mutual TLS whose Subject common name
// (or else first DNS name) is NAME; anonymous, a peer with neither. A token,
// when a HELLO has one, decides the identity; else the certificate.
// Topics and names are comma-separated patterns: exact, PREFIX* or *.
// Several lines may name one identity: it may use what any of them grants.
// Everything not granted is refused.
type ACL struct {
	tokens  []tokenEntry      // searched in constant time
	certs   map[string]string // certificate name -> identity
	anon    string            // identity of anonymous peers, "" if refused
	grants  map[string][]grant
	entries int
}

type tokenEntry struct {
	hash [sha256.Size]byte
	name string
}

type grant struct{ topics, producers []string }

// ParseACL reads an ACL in its text form (see ACL). It returns ErrACL,
// wrapped with the line number and the reason, for a malformed line or a
// credential given to two identities.
func ParseACL(r io.Reader) (*ACL, error) {
	a := &ACL{certs: map[string]string{}, grants: map[string][]grant{}}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if err := a.add(f); err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrACL, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrACL, err)
	}
	if a.entries == 0 {
		return nil, fmt.Errorf("%w: no grant (everything would be refused)", ErrACL)
	}
	return a, nil
}

// LoadACL reads the ACL in file path (see ParseACL).
func LoadACL(path string) (*ACL, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrACL, err)
	}
	defer f.Close()
	return ParseACL(f)
}

func (a *ACL) add(f []string) error {
	if len(f) != 4 {
		return fmt.Errorf("%d fields, want 4: identity credential topics producers", len(f))
	}
	name, cred := f[0], f[1]
	topics, err := patterns(f[2])
	if err != nil {
		return err
	}
	producers, err := patterns(f[3])
	if err != nil {
		return err
	}
	switch kind, value, _ := strings.Cut(cred, ":"); {
	case cred == "anonymous":
		if a.anon != "" && a.anon != name {
			return fmt.Errorf("anonymous is already identity %q", a.anon)
		}
		a.anon = name
	case kind == "cert" && value != "":
		if other, ok := a.certs[value]; ok && other != name {
			return fmt.Errorf("certificate %q is already identity %q", value, other)
		}
		a.certs[value] = name
	case kind == "token-sha256":
		b, err := hex.DecodeString(value)
		if err != nil || len(b) != sha256.Size {
			return fmt.Errorf("token-sha256 wants %d hex digits", 2*sha256.Size)
		}
		e := tokenEntry{hash: [sha256.Size]byte(b), name: name}
		for _, o := range a.tokens {
			if o.hash == e.hash && o.name != name {
				return fmt.Errorf("that token is already identity %q", o.name)
			}
		}
		a.tokens = append(a.tokens, e)
	default:
		return fmt.Errorf("credential %q: want token-sha256:HEX, cert:NAME or anonymous", cred)
	}
	a.grants[name] = append(a.grants[name], grant{topics: topics, producers: producers})
	a.entries++
	return nil
}

// patterns splits a comma-separated list of patterns: exact, PREFIX* or *.
func patterns(s string) ([]string, error) {
	ps := strings.Split(s, ",")
	for _, p := range ps {
		if p == "" || strings.Contains(strings.TrimSuffix(p, "*"), "*") {
			return nil, fmt.Errorf("pattern %q: want NAME, PREFIX* or *", p)
		}
	}
	return ps, nil
}

func matchAny(ps []string, s string) bool {
	for _, p := range ps {
		if prefix, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(s, prefix) || p == s {
			return true
		}
	}
	return false
}

// TokenHash returns the credential an ACL line takes for token:
// "token-sha256:" and the token's SHA-256 in hex.
func TokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return "token-sha256:" + hex.EncodeToString(h[:])
}

// Authenticate returns the identity c proves (see ACL). A token is
// compared with every token of the list in constant time: how long it
// takes tells nothing about which, if any, matched. Its errors never hold
// the token.
func (a *ACL) Authenticate(c Credentials) (Identity, error) {
	switch {
	case c.Token != "":
		h := sha256.Sum256([]byte(c.Token))
		match := -1
		for i := range a.tokens {
			eq := subtle.ConstantTimeCompare(h[:], a.tokens[i].hash[:])
			match = subtle.ConstantTimeSelect(eq, i, match)
		}
		if match < 0 {
			return Identity{}, fmt.Errorf("token not accepted")
		}
		return Identity{Name: a.tokens[match].name, Method: MethodToken}, nil
	case len(c.Certificates) > 0:
		cn := certName(c.Certificates[0])
		name, ok := a.certs[cn]
		if !ok {
			return Identity{}, fmt.Errorf("certificate %q not in the access list", cn)
		}
		return Identity{Name: name, Method: MethodCertificate}, nil
	case a.anon != "":
		return Identity{Name: a.anon, Method: MethodNone}, nil
	}
	return Identity{}, fmt.Errorf("credentials required (a token or a client certificate)")
}

// Authorize returns nil if some line of identity id grants topic and
// producer, an error saying what was refused otherwise. Topic "" (what a
// broker asks at HELLO) asks whether some line grants producer on any
// topic.
func (a *ACL) Authorize(id Identity, topic, producer string) error {
	for _, g := range a.grants[id.Name] {
		if (topic == "" || matchAny(g.topics, topic)) && matchAny(g.producers, producer) {
			return nil
		}
	}
	if topic == "" {
		return fmt.Errorf("%v may not write as producer %q", id, producer)
	}
	return fmt.Errorf("%v may not write topic %q as producer %q", id, topic, producer)
}
