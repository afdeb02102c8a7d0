// Command inflight shows, serves and loads the inflight protocol.
//
//	inflight demo      a producer against an embedded broker that is killed
//	                   and restarted while messages flow; proves the guarantees
//	inflight serve     a standalone broker over TCP or TLS
//	inflight produce   a load generator against any broker
//	inflight read      the records a store holds (file or NATS JetStream), one line each
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
	"syscall"
)

const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches to a subcommand; it is main without the process around it,
// so tests call it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
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
		return runProduce(ctx, args[1:], stdout, stderr)
	case "read":
		return runRead(ctx, args[1:], stdout, stderr)
	case "version", "-version", "--version":
		return runVersion(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return exitOK
	}
	fmt.Fprintf(stderr, "inflight: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: inflight <command> [flags]

commands:
  demo      run a producer against an embedded broker that is killed and
            restarted every few seconds, then prove the guarantees held
  serve     run a standalone broker over TCP or TLS
  produce   send messages to a broker and report throughput and latency
  read      print the records a store holds (file or NATS JetStream), one line each
  version   print the version of this build

Run 'inflight <command> -h' for the flags of a command.
`)
}
