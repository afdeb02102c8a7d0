package testcert_test

import (
	"crypto/x509"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/inflightmq/inflight/internal/testcert"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestVariants: each certificate verifies, or fails to, the way its name
// says.
func TestVariants(t *testing.T) {
	ca, err := testcert.NewCA("test CA")
	require.NoError(t, err)
	other, err := testcert.NewCA("other CA")
	require.NoError(t, err)
	server := x509.VerifyOptions{Roots: ca.Pool, DNSName: "127.0.0.1", CurrentTime: time.Now()}

	good, err := ca.Server()
	require.NoError(t, err)
	_, err = good.Leaf.Verify(server)
	require.NoError(t, err)

	expired, err := ca.Expired()
	require.NoError(t, err)
	_, err = expired.Leaf.Verify(server)
	var invalid x509.CertificateInvalidError
	require.ErrorAs(t, err, &invalid)
	require.Equal(t, x509.Expired, invalid.Reason)

	wrongHost, err := ca.WrongHost()
	require.NoError(t, err)
	_, err = wrongHost.Leaf.Verify(server)
	var host x509.HostnameError
	require.ErrorAs(t, err, &host)

	foreign, err := other.Server()
	require.NoError(t, err)
	_, err = foreign.Leaf.Verify(server)
	var unknown x509.UnknownAuthorityError
	require.ErrorAs(t, err, &unknown)

	client, err := ca.Client("alice")
	require.NoError(t, err)
	_, err = client.Leaf.Verify(x509.VerifyOptions{Roots: ca.Pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)
	require.Equal(t, "alice", client.Leaf.Subject.CommonName)
}
