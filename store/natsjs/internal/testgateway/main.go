// Command testgateway is a stateless inflight gateway on a JetStream store:
// what `inflight serve -store nats://...` does, kept small for the
// multi-process tests of package natsjs (a gateway killed with SIGKILL).
//
//	testgateway -listen 127.0.0.1:7070 -store nats://127.0.0.1:4222/INFLIGHT
//
// Its first line of output is "listening on ADDR"; SIGINT or SIGTERM close
// it gracefully.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/server"
	"github.com/inflightmq/inflight/store/natsjs"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	storeURL := flag.String("store", "", "nats://HOST:PORT[,HOST:PORT...]/STREAM[?options] (see natsjs.Open)")
	flag.Parse()
	if err := run(*listen, *storeURL); err != nil {
		fmt.Fprintln(os.Stderr, "testgateway:", err)
		os.Exit(1)
	}
}

func run(listen, storeURL string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	store, err := natsjs.Open(octx, storeURL)
	if err != nil {
		return err
	}
	defer store.Close()
	b, err := broker.New(store)
	if err != nil {
		return err
	}
	srv, err := server.New(listen, b)
	if err != nil {
		return err
	}
	fmt.Printf("listening on %s\n", srv.Addr())
	<-ctx.Done()
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	return srv.Close(sctx)
}
