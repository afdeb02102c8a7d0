package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/wire"
)

// certsPort is the port the commands certs prints listen on and dial.
const certsPort = "7443"

// certsStoreDir is the directory, in -dir, that certs makes for the file
// store of the serve command it prints, and certsStore that store's path
// in it.
const (
	certsStoreDir = "store"
	certsStore    = certsStoreDir + "/inflight"
	certsMessages = 1000 // produce's -n in the commands certs prints
)

func runCerts(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("certs", flag.ContinueOnError)
	dir := fs.String("dir", "", "directory to write the files into (required; made if missing)")
	hosts := fs.String("hosts", "127.0.0.1,localhost", "comma-separated IP addresses and DNS names producers reach the broker by: the server certificate's names")
	clients := fs.String("clients", "producer-1", "comma-separated client names: a certificate each, whose name the access list grants")
	topic := fs.String("topic", core.DefaultTopic, "topic the access list lets every client write")
	valid := fs.Duration("valid", 365*24*time.Hour, "how long the certificates are valid")
	force := fs.Bool("force", false, "overwrite files that exist")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: inflight certs -dir DIR [flags]

Writes into DIR what serve and produce need for mutual TLS with an access
list, and prints the commands that use them:

  ca.pem              a certificate authority made for this: serve's
                      -tls-client-ca and produce's -tls-ca
  ca-key.pem          its private key: keep it private, or delete it (no
                      command reads it; it only signs certificates)
  server.pem          serve's -tls-cert, for the names of -hosts
  server-key.pem      serve's -tls-key
  NAME.pem            produce's -tls-cert, for each NAME of -clients (the
                      certificate's common name is NAME)
  NAME-key.pem        produce's -tls-key
  acl.txt             serve's -auth: the certificate NAME may write -topic
                      as producer NAME or NAME-anything; nothing else
  store/              an empty directory (left as it is if it exists) for
                      serve's file store: -store file:DIR/store/inflight

Keys are ECDSA P-256; key files are readable by their owner only. Files
that exist are left alone (exit 1) unless -force. For a broker that
producers reach by another name, list it in -hosts.

flags:
`)
		fs.PrintDefaults()
	}
	if code := parseFlags(fs, args, stdout, stderr); code >= 0 {
		return code
	}
	hostList, clientList := splitList(*hosts), splitList(*clients)
	switch {
	case *dir == "":
		return usageError(fs, stderr, "-dir is required: the directory to write the files into")
	case len(hostList) == 0:
		return usageError(fs, stderr, "-hosts must name at least one IP address or DNS name")
	case len(clientList) == 0:
		return usageError(fs, stderr, "-clients must name at least one client")
	case *valid <= 0:
		return usageError(fs, stderr, "-valid must be positive")
	}
	for _, h := range hostList {
		if net.ParseIP(h) == nil && !validDNSName(h) {
			return usageError(fs, stderr, "-hosts: %q is neither an IP address nor a DNS name", h)
		}
	}
	for _, c := range clientList {
		if err := checkClientName(c); err != nil {
			return usageError(fs, stderr, "-clients: %v", err)
		}
	}
	if err := wire.CheckTopic(*topic); err != nil {
		return usageError(fs, stderr, "-topic: %v", err)
	}
	files, err := makeCerts(hostList, clientList, *topic, *valid)
	if err != nil {
		fmt.Fprintf(stderr, "inflight certs: %v\n", err)
		return exitFailure
	}
	if err := writeCertFiles(*dir, files, *force); err != nil {
		fmt.Fprintf(stderr, "inflight certs: %v\n", err)
		return exitFailure
	}
	printCertCommands(stdout, *dir, files, hostList[0], clientList, *topic, time.Now().Add(*valid))
	return exitOK
}

// certFile is one file certs writes.
type certFile struct {
	name string // in the directory
	data []byte
	mode fs.FileMode
}

// makeCerts makes the CA, the server's and the clients' certificates and
// keys, and the access list, as the files certs writes, in that order.
func makeCerts(hosts, clients []string, topic string, valid time.Duration) ([]certFile, error) {
	now := time.Now()
	ca, err := newAuthority("inflight CA "+now.UTC().Format("2006-01-02 15:04:05"), now.Add(valid))
	if err != nil {
		return nil, err
	}
	files := []certFile{{"ca.pem", pemCert(ca.cert.Raw), 0o644}}
	keyFile, err := pemKey(ca.key)
	if err != nil {
		return nil, err
	}
	files = append(files, certFile{"ca-key.pem", keyFile, 0o600})
	leaf := func(name string, tmpl *x509.Certificate) error {
		der, key, err := ca.issue(tmpl)
		if err != nil {
			return fmt.Errorf("certificate %s: %w", name, err)
		}
		keyFile, err := pemKey(key)
		if err != nil {
			return err
		}
		files = append(files, certFile{name + ".pem", pemCert(der), 0o644}, certFile{name + "-key.pem", keyFile, 0o600})
		return nil
	}
	if err := leaf("server", serverTemplate(hosts)); err != nil {
		return nil, err
	}
	var acl strings.Builder
	fmt.Fprintf(&acl, `# inflight access list, written by inflight certs (serve -auth reads it).
# One grant a line: identity, credential, topics, producer names; patterns
# are NAME, PREFIX* or *. cert:NAME is a client certificate, verified by
# mutual TLS, whose common name is NAME. Everything not granted is refused.
# (go doc github.com/inflightmq/inflight/broker.ACL has the whole format.)
#
# identity  credential  topics  producer names
`)
	for _, c := range clients {
		if err := leaf(c, clientTemplate(c)); err != nil {
			return nil, err
		}
		fmt.Fprintf(&acl, "%s cert:%s %s %s,%s-*\n", c, c, topic, c, c)
	}
	return append(files, certFile{"acl.txt", []byte(acl.String()), 0o644}), nil
}

// authority is a certificate authority made for certs, or for a run of
// demo -tls (in memory only): it signs leaf certificates, valid from an
// hour ago (clocks differ) until its own end.
type authority struct {
	cert      *x509.Certificate
	key       *ecdsa.PrivateKey
	notBefore time.Time
}

// newAuthority makes a CA named name, valid until notAfter, with an ECDSA
// P-256 key.
func newAuthority(name string, notAfter time.Time) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	notBefore := time.Now().Add(-time.Hour)
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true, // it signs leaf certificates only
	}
	der, err := signCert(tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key, notBefore: notBefore}, nil
}

// issue signs a certificate for tmpl (its subject, names and extended key
// usage), valid as long as the CA, with a new ECDSA P-256 key; it returns
// the certificate (DER) and the key.
func (ca *authority) issue(tmpl *x509.Certificate) ([]byte, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl.NotBefore, tmpl.NotAfter = ca.notBefore, ca.cert.NotAfter
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := signCert(tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	return der, key, nil
}

// tlsCert is issue's result as a tls.Certificate, for a tls.Config.
func (ca *authority) tlsCert(tmpl *x509.Certificate) (tls.Certificate, error) {
	der, key, err := ca.issue(tmpl)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// pool returns a pool holding the CA alone: a RootCAs or ClientCAs value.
func (ca *authority) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// serverTemplate is a server certificate for hosts (IP addresses and DNS
// names), named after the first.
func serverTemplate(hosts []string) *x509.Certificate {
	c := &x509.Certificate{Subject: pkix.Name{CommonName: hosts[0]}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			c.IPAddresses = append(c.IPAddresses, ip)
		} else {
			c.DNSNames = append(c.DNSNames, h)
		}
	}
	return c
}

// clientTemplate is a client certificate whose common name is name: the
// identity an access list's cert:NAME grants.
func clientTemplate(name string) *x509.Certificate {
	return &x509.Certificate{Subject: pkix.Name{CommonName: name}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
}

// signCert signs tmpl, given a random serial number, with the issuer's key.
func signCert(tmpl, issuer *x509.Certificate, pub *ecdsa.PublicKey, issuerKey *ecdsa.PrivateKey) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	return x509.CreateCertificate(rand.Reader, tmpl, issuer, pub, issuerKey)
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func pemKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// writeCertFiles writes files into dir, made if missing, with an empty
// directory for the store beside them. Unless force, it first checks that
// none of the files exists, and writes nothing if one does.
func writeCertFiles(dir string, files []certFile, force bool) error {
	if err := os.MkdirAll(filepath.Join(dir, certsStoreDir), 0o700); err != nil {
		return err
	}
	if !force {
		var exist []string
		for _, f := range files {
			if _, err := os.Lstat(filepath.Join(dir, f.name)); err == nil {
				exist = append(exist, f.name)
			}
		}
		if len(exist) > 0 {
			return fmt.Errorf("%s already holds %s: nothing written (-force overwrites)", dir, strings.Join(exist, ", "))
		}
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		if force {
			// A key file written before with looser permissions keeps them
			// through O_TRUNC: start it afresh.
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		out, err := os.OpenFile(path, flags, f.mode)
		if err != nil {
			return err
		}
		_, err = out.Write(f.data)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}

// printCertCommands says what was written and the serve and produce
// commands that use it.
func printCertCommands(w io.Writer, dir string, files []certFile, host string, clients []string, topic string, until time.Time) {
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.name
	}
	fmt.Fprintf(w, "wrote into %s (certificates valid until %s): %s\n", dir, until.UTC().Format(time.DateOnly), strings.Join(names, ", "))
	path := func(name string) string { return shellQuote(filepath.Join(dir, name)) }
	addr := net.JoinHostPort(host, certsPort)
	fmt.Fprintf(w, "\nserve over mutual TLS with the access list, storing into %s:\n  inflight serve -listen %s -store file:%s -tls-cert %s -tls-key %s -tls-client-ca %s -auth %s\n",
		path(certsStoreDir), addr, path(certsStore), path("server.pem"), path("server-key.pem"), path("ca.pem"), path("acl.txt"))
	for _, c := range clients {
		fmt.Fprintf(w, "\nproduce %d messages as %s:\n  inflight produce -addr %s -tls-ca %s -tls-cert %s -tls-key %s -topic %s -name %s -n %d\n",
			certsMessages, c, addr, path("ca.pem"), path(c+".pem"), path(c+"-key.pem"), topic, c, certsMessages)
	}
	fmt.Fprintf(w, "\nread what was stored (beside the running serve, or after it):\n  inflight read -store file:%s -topic %s\n", path(certsStore), topic)
	fmt.Fprintf(w, "\nca-key.pem signs certificates and no command reads it: keep it private, or delete it.\n")
}

// splitList splits a comma-separated flag value, dropping empty items and
// white space.
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// checkClientName accepts names that are safe as file names, as access
// list fields, and as producer names: ASCII letters, digits, '.', '_' and
// '-', not starting with '.', and not a name certs writes for itself.
func checkClientName(name string) error {
	if len(name) > wire.MaxProducerNameLen-2 { // room for NAME-*
		return fmt.Errorf("%q is longer than %d bytes", name, wire.MaxProducerNameLen-2)
	}
	if slices.Contains([]string{"ca", "server", "acl"}, name) {
		return fmt.Errorf("%q is a name certs uses for its own files", name)
	}
	for i, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.' && i > 0) {
			return fmt.Errorf("%q: use ASCII letters, digits, '.', '_' and '-' (not first '.')", name)
		}
	}
	return nil
}

// validDNSName reports whether s can be a DNS name in a certificate:
// dot-separated labels of letters, digits and '-', a leading "*." allowed.
func validDNSName(s string) bool {
	s = strings.TrimPrefix(s, "*.")
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range []byte(label) {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// shellQuote quotes s for a POSIX shell when it holds anything but
// letters, digits and /._-:=,+ (a path with a space, say).
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-:=,+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
