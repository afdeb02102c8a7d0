package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/internal/testcert"
	"github.com/inflightmq/inflight/wire"
)

// writePEM writes cert and its key as PEM files into dir; it returns their
// paths. Keys are made by the test and live in its temporary directory.
func writePEM(t *testing.T, dir, name string, cert tls.Certificate) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600))
	der, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
	return certFile, keyFile
}

// securedServe is a `serve` over mutual TLS with an access list, and the
// files a producer needs to reach it.
type securedServe struct {
	addr                  string
	out, errOut           *watchWriter
	caFile                string
	clientCert, clientKey string
	dir                   string
	stop                  func() int
}

const (
	cliToken   = "cli-token-5f1e2d3c4b5a69788796a5b4"
	wrongToken = "cli-token-wrong-000000000000000"
)

func startSecuredServe(t *testing.T) *securedServe {
	dir := t.TempDir()
	ca, err := testcert.NewCA(t.Name())
	require.NoError(t, err)
	caFile := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw}), 0o600))
	srvCert, err := ca.Server()
	require.NoError(t, err)
	certFile, keyFile := writePEM(t, dir, "server", srvCert)
	cliCert, err := ca.Client("till")
	require.NoError(t, err)
	clientCert, clientKey := writePEM(t, dir, "client", cliCert)
	acl := filepath.Join(dir, "acl")
	require.NoError(t, os.WriteFile(acl, fmt.Appendf(nil, "tills %s orders till-*\ntills cert:till orders till-*\n", broker.TokenHash(cliToken)), 0o600))

	ctx, cancel := context.WithCancel(context.Background())
	s := &securedServe{out: newWatchWriter(), errOut: newWatchWriter(), caFile: caFile, clientCert: clientCert, clientKey: clientKey, dir: dir}
	wait := runAsync(t, ctx, s.out, s.errOut, "serve", "-listen=127.0.0.1:0", "-stats-every=0",
		"-tls-cert="+certFile, "-tls-key="+keyFile, "-tls-client-ca="+caFile, "-auth="+acl)
	s.stop = func() int { cancel(); return wait() }
	s.addr = s.out.wait(t, listeningLine, 10*time.Second)[1]
	s.out.wait(t, regexp.MustCompile(`TLS 1.3, client certificates required; access list`), 10*time.Second)
	return s
}

func (s *securedServe) tokenFile(t *testing.T, token string) string {
	path := filepath.Join(s.dir, "token-"+token[len(token)-4:])
	require.NoError(t, os.WriteFile(path, []byte(token+"\n"), 0o600))
	return path
}

// TestServeTLSAuth: serve over mutual TLS with an access list; produce with
// the right certificate and token stores, with a wrong token or a name the
// list does not grant is refused (exit 1, "not authorized" in its output),
// and serve prints the refusals.
func TestServeTLSAuth(t *testing.T) {
	s := startSecuredServe(t)
	defer func() { assert.Equal(t, exitOK, s.stop()) }()
	tls := []string{"-addr=" + s.addr, "-tls-ca=" + s.caFile, "-tls-cert=" + s.clientCert, "-tls-key=" + s.clientKey,
		"-n=200", "-size=16", "-timeout=2s", "-topic=orders"}

	code, out, errOut := runCmd(t, append([]string{"produce", "-name=till-1", "-token-file=" + s.tokenFile(t, cliToken)}, tls...)...)
	require.Equal(t, exitOK, code, "stdout: %s\nstderr: %s", out, errOut)
	assert.Contains(t, out, "200 acked")

	code, out, _ = runCmd(t, append([]string{"produce", "-name=till-2"}, tls...)...) // the certificate alone
	require.Equal(t, exitOK, code, out)

	code, out, _ = runCmd(t, append([]string{"produce", "-name=till-3", "-n=1", "-timeout=300ms", "-token-file=" + s.tokenFile(t, wrongToken)}, tls...)...)
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, out, "not authorized")
	// A HELLO names no topic (protocol version 4): the broker refuses
	// there what no line grants on any topic, and each topic at TOPIC.
	s.out.wait(t, regexp.MustCompile(`refused anonymous as producer till-3 \(HELLO\): .*token not accepted`), 10*time.Second)

	code, out, _ = runCmd(t, append([]string{"produce", "-name=pos-1", "-n=1", "-timeout=300ms"}, tls...)...)
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, out, `may not write as producer "pos-1"`)
	s.out.wait(t, regexp.MustCompile(`refused certificate tills as producer pos-1 \(HELLO\): .*may not write as producer`), 10*time.Second)

	code, out, _ = runCmd(t, append(append([]string{"produce", "-name=till-4", "-n=1", "-timeout=300ms"}, tls...), "-topic=payments")...)
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, out, `may not write topic "payments" as producer "till-4"`)
	s.out.wait(t, regexp.MustCompile(`refused certificate tills topic payments as producer till-4 \(TOPIC\): .*may not write topic`), 10*time.Second)

	// Without a client certificate the TLS handshake itself fails.
	code, out, _ = runCmd(t, "produce", "-addr="+s.addr, "-tls-ca="+s.caFile, "-n=1", "-timeout=300ms")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, out, "handshake")
}

// TestTokenNeverLogged: what serve and produce print, with a right and a
// wrong token, from a file and from the environment, never holds a token.
func TestTokenNeverLogged(t *testing.T) {
	s := startSecuredServe(t)
	tls := []string{"-addr=" + s.addr, "-tls-ca=" + s.caFile, "-tls-cert=" + s.clientCert, "-tls-key=" + s.clientKey,
		"-size=16", "-topic=orders", "-name=till-9"}
	var all strings.Builder
	for _, args := range [][]string{
		{"-token-file=" + s.tokenFile(t, cliToken), "-n=10"},
		{"-token-file=" + s.tokenFile(t, wrongToken), "-n=1", "-timeout=300ms"},
	} {
		_, out, errOut := runCmd(t, append(append([]string{"produce"}, tls...), args...)...)
		all.WriteString(out + errOut)
	}
	t.Setenv(tokenEnv, wrongToken)
	_, out, errOut := runCmd(t, append([]string{"produce", "-n=1", "-timeout=300ms"}, tls...)...)
	all.WriteString(out + errOut)
	require.Equal(t, exitOK, s.stop())
	all.WriteString(s.out.String() + s.errOut.String())

	text := all.String()
	require.Contains(t, text, "token not accepted", "the refusals were printed")
	for _, tok := range []string{cliToken, wrongToken} {
		assert.NotContains(t, text, tok)
	}
}

func TestSecurityBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "-tls-cert=x"},
		{"serve", "-tls-key=x"},
		{"serve", "-tls-client-ca=x"},
		{"produce", "-tls-cert=x"},
		{"produce", "-token-file=/no/such/file"},
	} {
		code, _, errOut := runCmd(t, args...)
		assert.Equal(t, exitUsage, code, "%v", args)
		assert.NotEmpty(t, errOut)
	}
	code, _, errOut := runCmd(t, "serve", "-listen=127.0.0.1:0", "-auth=/no/such/file")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, errOut, "access list")
}

// TestDemoTLS: the demo over mutual TLS with an access list; the intruder
// is refused.
func TestDemoTLS(t *testing.T) {
	code, out, errOut := runCmd(t, "demo", "-tls", "-duration=1s", "-kill-every=300ms", "-down-for=100ms", "-timeout=500ms", "-max-pending=4096")
	t.Log(out)
	require.Equal(t, exitOK, code, "stderr: %s", errOut)
	assert.Contains(t, out, "mutual TLS 1.3")
	assert.Regexp(t, `intruder refused the producer's name\s+ok`, out)
	assert.Contains(t, out, "all guarantees held")
}

// TestServeSIGHUPReloadsCertificate: serve over TLS presents the certificate
// files as they are after a SIGHUP (a certificate renewed on disk, here by
// another CA); files that no longer load leave the current certificate in
// place, and serve goes on.
func TestServeSIGHUPReloadsCertificate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker process")
	}
	dir := t.TempDir()
	issue := func(name string) (*testcert.CA, tls.Certificate) {
		ca, err := testcert.NewCA(name)
		require.NoError(t, err)
		cert, err := ca.Server()
		require.NoError(t, err)
		return ca, cert
	}
	caA, certA := issue("before")
	caB, certB := issue("after")
	certFile, keyFile := writePEM(t, dir, "server", certA)
	cmd, addr, log := startServeLogged(t, "-listen=127.0.0.1:0 -stats-every=0 -tls-cert="+certFile+" -tls-key="+keyFile)
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	// verifies reports whether the server's certificate chains to ca.
	verifies := func(ca *testcert.CA) bool {
		d := tls.Dialer{Config: &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13}}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return false
		}
		_ = conn.Close()
		return true
	}
	reloaded := regexp.MustCompile(`msg="SIGHUP: certificate reloaded"`)
	refused := regexp.MustCompile(`level=ERROR msg="SIGHUP: the certificate files could not be reloaded; the current certificate stays"`)
	require.True(t, verifies(caA))
	require.False(t, verifies(caB))

	writePEM(t, dir, "server", certB) // renewed on disk
	require.True(t, verifies(caA), "nothing changes before the SIGHUP")
	require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
	log.wait(t, reloaded, 10*time.Second)
	assert.True(t, verifies(caB), "the renewed certificate")
	assert.False(t, verifies(caA))

	require.NoError(t, os.WriteFile(certFile, []byte("not a certificate"), 0o600))
	require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
	log.wait(t, refused, 10*time.Second)
	assert.True(t, verifies(caB), "the current certificate stays")
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "serve exits 0")
}

// TestServeLogsRefusals: serve logs every connection it refuses, or closes
// before its HELLO, once with its cause, and counts it in its stats line
// and in Prometheus: a connection that never sends its HELLO (handshake
// timeout), one beyond -max-conns, a TLS handshake without the client
// certificate, plain TCP on the TLS port; and produce without -tls against
// a TLS serve says that the server expects TLS.
func TestServeLogsRefusals(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	out := newWatchWriter()
	wait := runAsync(t, ctx, out, io.Discard, "serve", "-listen=127.0.0.1:0", "-metrics=127.0.0.1:0", "-stats-every=50ms",
		"-max-conns=1", "-handshake-timeout=300ms")
	addr := out.wait(t, listeningLine, 10*time.Second)[1]
	metricsAddr := out.wait(t, regexp.MustCompile(`metrics=http://(\S+)/metrics`), 10*time.Second)[1]

	silent, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer silent.Close()
	out.wait(t, regexp.MustCompile(`level=WARN msg=refused what="connection: refused a connection from 127\.0\.0\.1: inflight/server: no HELLO within the handshake timeout \(300ms\)"`), 10*time.Second)

	held, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer held.Close()
	h, err := wire.AppendHello(nil, wire.Hello{Version: wire.Version, MaxFrameSize: wire.DefaultMaxFrameSize, Producer: "held"})
	require.NoError(t, err)
	_, err = held.Write(h)
	require.NoError(t, err)
	_, err = held.Read(make([]byte, 64)) // HELLO_OK: past its HELLO, it holds the one slot
	require.NoError(t, err)
	code, pout, _ := runCmd(t, "produce", "-addr="+addr, "-n=1", "-timeout=300ms")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, pout, "too many connections")
	out.wait(t, regexp.MustCompile(`msg=refused what="connection: refused a connection from 127\.0\.0\.1: inflight/server: too many connections"`), 10*time.Second)
	out.wait(t, regexp.MustCompile(`msg=stats conns=1 pending=0 .* refused=[2-9]\d* too_many_conns=[1-9]\d* too_many_pending=0 handshake_timeouts=1 `), 10*time.Second)

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + metricsAddr + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Regexp(t, `(?m)^inflight_server_connections_refused_total [1-9]`, string(body))
	assert.Regexp(t, `(?m)^inflight_server_handshake_timeouts_total 1$`, string(body))
	stop()
	assert.Equal(t, exitOK, wait())

	t.Run("tls", func(t *testing.T) {
		s := startSecuredServe(t)
		defer func() { assert.Equal(t, exitOK, s.stop()) }()
		code, out, _ := runCmd(t, "produce", "-addr="+s.addr, "-tls-ca="+s.caFile, "-n=1", "-timeout=300ms")
		assert.Equal(t, exitFailure, code)
		s.out.wait(t, regexp.MustCompile(`msg=refused what="connection: refused a connection from 127\.0\.0\.1: inflight/server: TLS handshake failed: tls: client didn't provide a certificate"`), 10*time.Second)
		t.Logf("produce without a client certificate:\n%s", out)

		code, out, _ = runCmd(t, "produce", "-addr="+s.addr, "-n=1", "-timeout=300ms")
		assert.Equal(t, exitFailure, code)
		assert.Contains(t, out, "the server expects TLS")
		s.out.wait(t, regexp.MustCompile(`msg=refused what="connection: refused a connection from 127\.0\.0\.1: inflight/server: the server expects TLS"`), 10*time.Second)
		t.Logf("produce without -tls:\n%s", out)
	})
}
