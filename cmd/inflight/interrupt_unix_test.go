//go:build unix

package main

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestInterruptsFirstThenSecond: main's first SIGINT cancels the context
// it runs the command with, and only the second cancels the one that
// secondInterrupt returns.
func TestInterruptsFirstThenSecond(t *testing.T) {
	ctx, stop := notifyInterrupts()
	defer stop()
	second := secondInterrupt(ctx)
	require.NotNil(t, second)
	wait := func(done <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s not canceled", what)
		}
	}
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
	wait(ctx.Done(), "the first interrupt's context")
	require.NoError(t, second.Err(), "one interrupt")
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	wait(second.Done(), "the second interrupt's context")
}
