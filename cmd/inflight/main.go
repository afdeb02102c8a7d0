// Command inflight shows, serves and loads the inflight protocol.
//
//	inflight demo      a producer against an embedded broker that is killed
//	                   and restarted while messages flow; proves the guarantees
//	inflight serve     a standalone broker over TCP or TLS
//	inflight produce   a load generator against any broker
//	inflight read      the records a store holds (file or NATS JetStream), one line each,
//	                   and with -follow those stored after
//	inflight certs     certificates and an access list for serve and produce over mutual TLS
//	inflight version   the version of this build
//
// Exit status: 0 success, 1 failure (for demo: a guarantee did not hold), 2
// bad usage. Each subcommand takes -h.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
)

const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	ctx, stop := notifyInterrupts()
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// notifyInterrupts returns a context that the first SIGINT or SIGTERM
// cancels, carrying one that the second cancels (see secondInterrupt):
// produce drains at the first and stops draining at the second. After the
// second, the signals' default action is back, so a third ends the
// process whatever it is doing. stop releases the signals; the goroutine
// that watches them is stop's, and ends with it (or after the second).
func notifyInterrupts() (ctx context.Context, stop func()) {
	first, cancelFirst := context.WithCancel(context.Background())
	second, cancelSecond := context.WithCancel(context.Background())
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		defer signal.Stop(sig)
		for _, cancel := range []context.CancelFunc{cancelFirst, cancelSecond} {
			select {
			case <-sig:
				cancel()
			case <-done:
				return
			}
		}
	}()
	return withSecondInterrupt(first, second), sync.OnceFunc(func() {
		close(done)
		signal.Stop(sig)
		cancelFirst()
		cancelSecond()
	})
}

// secondInterruptKey is the context key of the second interrupt.
type secondInterruptKey struct{}

// withSecondInterrupt returns ctx, the first interrupt's context,
// carrying second, which the next interrupt cancels.
func withSecondInterrupt(ctx, second context.Context) context.Context {
	return context.WithValue(ctx, secondInterruptKey{}, second)
}

// secondInterrupt returns the context that a second interrupt cancels, or
// nil if ctx carries none (a test's context, or serveChild's).
func secondInterrupt(ctx context.Context) context.Context {
	second, _ := ctx.Value(secondInterruptKey{}).(context.Context)
	return second
}

// commands are the subcommands, in the order the usage lists them.
var commands = []string{"demo", "serve", "produce", "read", "certs", "version"}

// run dispatches to a subcommand; it is main without the process around it,
// so tests call it directly. Only produce -input - reads stdin.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "demo":
		return runDemo(ctx, args[1:], stdout, stderr)
	case "serve":
		return runServe(ctx, args[1:], stdout, stderr)
	case "produce":
		return runProduce(ctx, args[1:], stdin, stdout, stderr)
	case "read":
		return runRead(ctx, args[1:], stdout, stderr)
	case "certs":
		return runCerts(args[1:], stdout, stderr)
	case "version", "-version", "--version":
		return runVersion(args[1:], stdout, stderr)
	case "help":
		return runHelp(ctx, args[1:], stdin, stdout, stderr)
	case "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	}
	why := fmt.Sprintf("unknown command %q", args[0])
	if close := closeNames(strings.TrimLeft(args[0], "-"), commands); len(close) > 0 {
		why += " (did you mean " + strings.Join(close, " or ") + "?)"
	}
	fmt.Fprintf(stderr, "inflight: %s\nsee 'inflight -h'\n", why)
	return exitUsage
}

// runHelp is `inflight help [COMMAND]`: the usage of the command, or of
// inflight, on stdout.
func runHelp(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0 || len(args) == 1 && args[0] == "help":
		usage(stdout)
		return exitOK
	case len(args) > 1:
		fmt.Fprintf(stderr, "inflight help: one command at most, not %q\nsee 'inflight -h'\n", strings.Join(args, " "))
		return exitUsage
	case !slices.Contains(commands, args[0]):
		fmt.Fprintf(stderr, "inflight help: unknown command %q\nsee 'inflight -h'\n", args[0])
		return exitUsage
	}
	return run(ctx, []string{args[0], "-h"}, stdin, stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: inflight <command> [flags]

commands:
  demo      run a producer against an embedded broker that is killed and
            restarted every few seconds, then prove the guarantees held
  serve     run a standalone broker over TCP or TLS
  produce   send messages to a broker and report throughput and latency
  read      print the records a store holds (file or NATS JetStream), one line
            each; -follow goes on with new ones as they are stored
  certs     write a CA, server and client certificates and an access list
            for serve and produce over mutual TLS
  version   print the version of this build

Run 'inflight <command> -h' or 'inflight help <command>' for the flags of a
command. Exit status: 0 success, 1 failure, 2 bad usage.
`)
}
