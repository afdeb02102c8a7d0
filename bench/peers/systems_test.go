package peers

import (
	"context"
	"testing"
)

// client is one producer under test, connected to its broker.
type client interface {
	// send hands one message to the client without waiting for its
	// acknowledgement, which reaches the tracker given to open. It may wait
	// when the client's window is full; that is the client's backpressure.
	// payload is the run's i-th (see -peers.distinct; 0 with one payload):
	// a client may keep what it made for it and use it again.
	send(i int, payload []byte) error
	// flush waits until every message sent so far is acknowledged (or
	// failed).
	flush(ctx context.Context) error
}

// preparer is a client that makes what it sends for each payload of a run
// before the run starts (see client.send): warm calls prepare with the
// run's payloads before its first send.
type preparer interface {
	prepare(payloads [][]byte)
}

// system is a way to run a client and its broker in this process. open
// starts both and registers their shutdown with tb.Cleanup.
type system struct {
	name string
	open func(tb testing.TB, t *tracker) client
}

var systems = []system{
	{"inflight-mem", openInflightMem},
	{"inflight-tcp", openInflightTCP},
	{"inflight-stdnet", openInflightStdnet},
	{"nats-js", openNATS},
	{"franz-kfake", openFranz(false)},
	{"franz-kfake-linger0", openFranz(true)},
}
