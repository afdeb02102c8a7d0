package faultproxy

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo serves a line echo on loopback until the test ends.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

func roundTrip(c net.Conn, r *bufio.Reader, msg string) (string, error) {
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	return r.ReadString('\n')
}

func TestProxyForwardsCutsRefusesStalls(t *testing.T) {
	p, err := New(echo(t))
	require.NoError(t, err)
	defer p.Close()

	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	r := bufio.NewReader(c)
	got, err := roundTrip(c, r, "hello")
	require.NoError(t, err)
	assert.Equal(t, "hello\n", got)

	p.Delay(20 * time.Millisecond)
	start := time.Now()
	_, err = roundTrip(c, r, "slow")
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)
	p.Delay(0)

	p.Stall(true)
	_ = c.SetDeadline(time.Now().Add(50 * time.Millisecond))
	_, _ = c.Write([]byte("stuck\n"))
	_, err = r.ReadString('\n')
	assert.Error(t, err, "nothing comes back while stalled")
	p.Stall(false)
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "stuck\n", line, "released when the stall ends")

	p.Cut()
	_, err = roundTrip(c, r, "after cut")
	assert.Error(t, err)

	p.Refuse(true)
	c2, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	_, err = roundTrip(c2, bufio.NewReader(c2), "refused")
	assert.Error(t, err)
	c2.Close()
	p.Refuse(false)
	require.NoError(t, p.Close())
	require.NoError(t, p.Close())
}
