package natsjs

import (
	"time"

	"github.com/nats-io/nats.go"
)

// Connect dials NATS at urls (comma-separated) with the options the store
// needs, then opts (which may override all but the first):
//
//   - ReconnectBufSize(-1): a publish while disconnected fails at once.
//     nats.go's default buffers it and writes it after the reconnect, behind
//     the broker's back: the inflight ring must stay the only window of
//     unacknowledged records. New refuses a connection without it.
//   - MaxReconnects(-1), ReconnectWait 50 ms: the connection keeps coming
//     back; an Append meanwhile fails and the producer resends later.
//   - PingInterval 2 s, MaxPingsOutstanding 2: a dead server is noticed
//     in about 4 s instead of 4 minutes.
func Connect(urls string, opts ...nats.Option) (*nats.Conn, error) {
	all := append([]nats.Option{
		nats.MaxReconnects(-1),
		nats.ReconnectWait(50 * time.Millisecond),
		nats.PingInterval(2 * time.Second),
		nats.MaxPingsOutstanding(2),
	}, opts...)
	all = append(all, nats.ReconnectBufSize(-1))
	return nats.Connect(urls, all...)
}
