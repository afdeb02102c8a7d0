package server

import (
	"crypto/tls"
	"fmt"
	"sync/atomic"
)

// reloadable holds a server certificate that can be swapped while the
// server runs: handshakes read it through GetCertificate, so a new one
// takes effect at the next handshake; established connections keep theirs.
type reloadable struct {
	cert atomic.Pointer[tls.Certificate]
}

// takeOver makes cfg (the server's own clone) read its certificate from r,
// if cfg has exactly one certificate and no callback of its own; it reports
// whether it did.
func (r *reloadable) takeOver(cfg *tls.Config) bool {
	if len(cfg.Certificates) != 1 || cfg.GetCertificate != nil || cfg.GetConfigForClient != nil {
		return false
	}
	cert := cfg.Certificates[0]
	r.cert.Store(&cert)
	cfg.Certificates = nil
	cfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return r.cert.Load(), nil }
	return true
}

// ReloadCertificate makes the server present cert from the next TLS
// handshake on; connections already established keep the certificate they
// were shown. It returns ErrNoTLS if the server was not started with
// exactly one certificate in its TLS config (and no GetCertificate
// or GetConfigForClient of its own), ErrInvalidOption if cert has no
// certificate or no private key. Safe for concurrent use.
func (s *Server) ReloadCertificate(cert tls.Certificate) error {
	if !s.reloadable {
		return ErrNoTLS
	}
	if len(cert.Certificate) == 0 || cert.PrivateKey == nil {
		return fmt.Errorf("%w: ReloadCertificate needs a certificate and its private key", ErrInvalidOption)
	}
	s.cert.cert.Store(&cert)
	return nil
}

// ReloadCertificateFiles loads a PEM certificate chain and its key (see
// tls.LoadX509KeyPair) and calls ReloadCertificate: what a server does on
// SIGHUP after its certificate was renewed on disk. On error the server
// keeps its current certificate.
func (s *Server) ReloadCertificateFiles(certFile, keyFile string) error {
	if !s.reloadable {
		return ErrNoTLS
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("inflight/server: reload certificate: %w", err)
	}
	return s.ReloadCertificate(cert)
}
