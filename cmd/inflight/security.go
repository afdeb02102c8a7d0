package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/server"
	"github.com/inflightmq/inflight/transport"
	"github.com/inflightmq/inflight/transport/stdnet"
	"github.com/inflightmq/inflight/transport/tcp"
)

// tokenEnv names the environment variable produce reads a token from when
// -token-file is not given. A token is never a flag value: command lines
// are visible to every user of the machine (ps, /proc).
const tokenEnv = "INFLIGHT_TOKEN"

// serverSecurity is serve's -tls-cert, -tls-key, -tls-client-ca and -auth.
type serverSecurity struct {
	cert, key, clientCA, auth string
}

func (s *serverSecurity) register(fs *flag.FlagSet) {
	fs.StringVar(&s.cert, "tls-cert", "", "PEM certificate chain: serve over TLS 1.3 (with -tls-key; reloaded on SIGHUP)")
	fs.StringVar(&s.key, "tls-key", "", "PEM private key of -tls-cert")
	fs.StringVar(&s.clientCA, "tls-client-ca", "", "PEM CA certificates: require a client certificate they issued (mutual TLS)")
	fs.StringVar(&s.auth, "auth", "", "access list file: identities, their token hashes or certificate names, their topics and producer names; everything else is refused")
}

// check reports flags that cannot work together.
func (s *serverSecurity) check() error {
	switch {
	case (s.cert == "") != (s.key == ""):
		return errors.New("-tls-cert and -tls-key go together")
	case s.clientCA != "" && s.cert == "":
		return errors.New("-tls-client-ca needs -tls-cert and -tls-key")
	}
	return nil
}

func (s *serverSecurity) tls() bool { return s.cert != "" }

// brokerOptions loads the access list of -auth.
func (s *serverSecurity) brokerOptions() ([]broker.Option, error) {
	if s.auth == "" {
		return nil, nil
	}
	acl, err := broker.LoadACL(s.auth)
	if err != nil {
		return nil, err
	}
	return []broker.Option{broker.WithACL(acl)}, nil
}

// serverOptions loads the certificate, its key and the client CAs.
func (s *serverSecurity) serverOptions() ([]server.Option, error) {
	cert, err := tls.LoadX509KeyPair(s.cert, s.key)
	if err != nil {
		return nil, fmt.Errorf("-tls-cert/-tls-key: %w", err)
	}
	opts := []server.Option{server.TLS(&tls.Config{Certificates: []tls.Certificate{cert}})}
	if s.clientCA != "" {
		pool, err := loadPool(s.clientCA)
		if err != nil {
			return nil, fmt.Errorf("-tls-client-ca: %w", err)
		}
		opts = append(opts, server.RequireClientCert(pool))
	}
	return opts, nil
}

// loadPool reads PEM CA certificates from path.
func loadPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate", path)
	}
	return pool, nil
}

// clientSecurity is produce's -tls, -tls-ca, -tls-cert, -tls-key and
// -token-file.
type clientSecurity struct {
	tls           bool
	ca, cert, key string
	tokenFile     string
	serverName    string
}

func (c *clientSecurity) register(fs *flag.FlagSet) {
	fs.BoolVar(&c.tls, "tls", false, "connect over TLS 1.3, trusting the system's CAs (implied by the other -tls flags)")
	fs.StringVar(&c.ca, "tls-ca", "", "PEM CA certificates to trust instead of the system's")
	fs.StringVar(&c.cert, "tls-cert", "", "PEM client certificate, for mutual TLS (with -tls-key)")
	fs.StringVar(&c.key, "tls-key", "", "PEM private key of -tls-cert")
	fs.StringVar(&c.serverName, "tls-server-name", "", "name the broker's certificate must have (default: the host of the -addr address being dialed)")
	fs.StringVar(&c.tokenFile, "token-file", "", "file holding the token to present (default: $"+tokenEnv+" if set)")
}

func (c *clientSecurity) check() error {
	if (c.cert == "") != (c.key == "") {
		return errors.New("-tls-cert and -tls-key go together")
	}
	c.tls = c.tls || c.ca != "" || c.cert != "" || c.serverName != ""
	return nil
}

// dialer returns a dialer for addr: stdnet over TLS with the -tls flags,
// else gnet's tcp.
func (c *clientSecurity) dialer(addr string) (transport.Dialer, func() error, error) {
	if !c.tls {
		d, err := tcp.NewDialer(addr)
		if err != nil {
			return nil, nil, err
		}
		return d, d.Close, nil
	}
	cfg := &tls.Config{ServerName: c.serverName}
	if c.ca != "" {
		pool, err := loadPool(c.ca)
		if err != nil {
			return nil, nil, fmt.Errorf("-tls-ca: %w", err)
		}
		cfg.RootCAs = pool
	}
	if c.cert != "" {
		cert, err := tls.LoadX509KeyPair(c.cert, c.key)
		if err != nil {
			return nil, nil, fmt.Errorf("-tls-cert/-tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	d, err := stdnet.NewDialer(addr, stdnet.ClientTLS(cfg))
	if err != nil {
		return nil, nil, err
	}
	return d, d.Close, nil
}

// token returns the core.Token option of -token-file or $INFLIGHT_TOKEN,
// nil for none. Surrounding white space (a final newline) is not part of
// the token.
func (c *clientSecurity) token() (core.Option, error) {
	tok, ok := os.LookupEnv(tokenEnv)
	if c.tokenFile != "" {
		b, err := os.ReadFile(c.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("-token-file: %w", err)
		}
		tok, ok = string(b), true
	}
	tok = strings.TrimSpace(tok)
	if !ok || tok == "" {
		return nil, nil
	}
	return core.Token(tok), nil
}
