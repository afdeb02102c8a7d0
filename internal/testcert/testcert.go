// Package testcert makes X.509 certificates for tests, in memory: a CA and
// the server and client certificates it signs, plus the broken ones a TLS
// test needs (expired, signed by another CA, issued for another host). Keys
// are ECDSA P-256, generated on each call and never written anywhere: no
// private key is committed to the repository.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"time"
)

// CA is a certificate authority for one test.
type CA struct {
	Cert *x509.Certificate
	Pool *x509.CertPool // holds Cert alone: a RootCAs or ClientCAs value
	key  *ecdsa.PrivateKey
}

// NewCA returns a fresh self-signed CA named name, valid from an hour ago
// for a day.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("testcert: CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("testcert: CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("testcert: CA: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{Cert: cert, Pool: pool, key: key}, nil
}

// Leaf describes a certificate for Issue.
type Leaf struct {
	// CommonName names the subject (a client's identity).
	CommonName string
	// Hosts are the DNS names and IP addresses the certificate is valid
	// for (servers).
	Hosts []string
	// Client makes a client certificate (ExtKeyUsageClientAuth) instead of
	// a server one.
	Client bool
	// NotBefore and NotAfter default to an hour ago and a day from now.
	NotBefore, NotAfter time.Time
}

// Issue returns a certificate for l signed by ca, with its private key, as
// a tls.Certificate ready for a tls.Config.
func (ca *CA) Issue(l Leaf) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("testcert: key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: l.CommonName},
		NotBefore:    l.NotBefore,
		NotAfter:     l.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = now.Add(-time.Hour)
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = now.Add(24 * time.Hour)
	}
	if l.Client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	for _, h := range l.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("testcert: certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("testcert: certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// Server issues a server certificate for 127.0.0.1 and localhost.
func (ca *CA) Server() (tls.Certificate, error) {
	return ca.Issue(Leaf{CommonName: "inflight test server", Hosts: []string{"127.0.0.1", "localhost"}})
}

// Client issues a client certificate whose subject is name.
func (ca *CA) Client(name string) (tls.Certificate, error) {
	return ca.Issue(Leaf{CommonName: name, Client: true})
}

// Expired issues a server certificate for 127.0.0.1 and localhost that
// expired an hour ago.
func (ca *CA) Expired() (tls.Certificate, error) {
	now := time.Now()
	return ca.Issue(Leaf{CommonName: "expired", Hosts: []string{"127.0.0.1", "localhost"},
		NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-time.Hour)})
}

// WrongHost issues a valid server certificate for a host that is not this
// one.
func (ca *CA) WrongHost() (tls.Certificate, error) {
	return ca.Issue(Leaf{CommonName: "elsewhere", Hosts: []string{"broker.example.com", "192.0.2.1"}})
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

// ServerConfig returns a server tls.Config holding a fresh certificate
// from Server.
func (ca *CA) ServerConfig() (*tls.Config, error) {
	cert, err := ca.Server()
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}}, nil
}

// ClientConfig returns a client tls.Config that trusts ca alone.
func (ca *CA) ClientConfig() *tls.Config { return &tls.Config{RootCAs: ca.Pool} }
