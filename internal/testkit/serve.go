package testkit

import (
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Serve listens on a loopback address, hands each connection it accepts to
// serve on a goroutine of its own, closes the connection when serve
// returns, and returns the address. The listener closes at the end of the
// test, which then waits for every serve to return.
func Serve(t testing.TB, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				serve(c)
			})
		}
	})
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().String()
}
