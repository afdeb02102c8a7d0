package tcp_test

import (
	"context"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/internal/leakcheck"
	"github.com/inflightmq/inflight/server"
)

// shared is one server for the tests that do not stop it: a gnet engine
// takes a while to start and stop.
var shared struct {
	store  *broker.MemoryStore
	broker *broker.Broker
	server *server.Server
}

func TestMain(m *testing.M) {
	shared.store = broker.NewMemoryStore()
	shared.broker, _ = broker.New(shared.store)
	var err error
	shared.server, err = server.New("127.0.0.1:0", shared.broker, server.ReadTimeout(200*time.Millisecond))
	if err != nil {
		panic(err)
	}
	code := m.Run()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := shared.server.Close(ctx); err != nil {
		panic(err)
	}
	if code == 0 {
		if err := goleak.Find(leakcheck.Options()...); err != nil {
			println("goleak:", err.Error())
			code = 1
		}
	}
	os.Exit(code)
}
