// Package natsjstest starts NATS JetStream servers in the calling process
// on 127.0.0.1 (random ports, stores under a directory the caller owns), for
// tests, benchmarks and demos of the natsjs store.
package natsjstest

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Options tune the servers; the zero value is the servers' defaults.
type Options struct {
	// MaxPayload is the servers' max_payload (0: 1 MiB).
	MaxPayload int32
	// MaxBatchSize is the servers' limit on an atomic batch (0: 1000).
	MaxBatchSize int
	// MaxPending is the servers' max_pending: the bytes a server holds for
	// one client before it cuts it off as a slow consumer (0: 64 MiB).
	MaxPending int64
}

// Cluster is n servers, joined by routes when n > 1. Its methods are safe
// for concurrent use.
type Cluster struct {
	mu      sync.Mutex
	servers []*server.Server // nil once stopped
	opts    []*server.Options
}

// Start starts n servers (1: a lone JetStream server) with their stores in
// dir/n0, dir/n1, ... and waits until JetStream has a meta leader that every
// server follows, at most 30 s. The caller stops them with Shutdown.
func Start(dir string, n int, o Options) (*Cluster, error) {
	ports, routes, err := clusterPorts(n)
	if err != nil {
		return nil, err
	}
	c := &Cluster{}
	for i := range n {
		so := &server.Options{
			ServerName: fmt.Sprintf("n%d", i),
			Host:       "127.0.0.1",
			Port:       ports[i],
			NoLog:      true,
			NoSigs:     true,
			JetStream:  true,
			StoreDir:   filepath.Join(dir, fmt.Sprintf("n%d", i)),
			MaxPayload: o.MaxPayload,
			MaxPending: o.MaxPending,
		}
		so.JetStreamLimits.MaxBatchSize = o.MaxBatchSize
		if n > 1 {
			so.Cluster = server.ClusterOpts{Name: "inflight", Host: "127.0.0.1", Port: ports[n+i]}
			so.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		}
		c.opts = append(c.opts, so)
	}
	for _, so := range c.opts {
		s, err := server.NewServer(so)
		if err != nil {
			c.Shutdown()
			return nil, err
		}
		s.Start()
		c.servers = append(c.servers, s)
	}
	for _, s := range c.servers {
		if !s.ReadyForConnections(10 * time.Second) {
			c.Shutdown()
			return nil, errors.New("natsjstest: server not ready in 10s")
		}
	}
	if err := c.waitMeta(30 * time.Second); err != nil {
		c.Shutdown()
		return nil, err
	}
	return c, nil
}

// WaitReady waits until JetStream has a meta leader that every running
// server follows, at most d (after servers were stopped and restarted).
func (c *Cluster) WaitReady(d time.Duration) error { return c.waitMeta(d) }

func (c *Cluster) waitMeta(d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if c.metaReady() {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return errors.New("natsjstest: no JetStream meta leader in time")
}

func (c *Cluster) metaReady() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.servers) == 1 {
		return c.servers[0].JetStreamEnabled()
	}
	leader := false
	for _, s := range c.servers {
		if s == nil {
			continue
		}
		if !s.JetStreamIsCurrent() {
			return false
		}
		if s.JetStreamIsLeader() && len(s.JetStreamClusterPeers()) >= len(c.servers) {
			leader = true
		}
	}
	return leader
}

// URLs returns the client URLs of the running servers, comma-separated.
func (c *Cluster) URLs() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var u []string
	for _, s := range c.servers {
		if s != nil {
			u = append(u, s.ClientURL())
		}
	}
	return strings.Join(u, ",")
}

// StreamLeader returns the index of the server leading stream (in the
// global account), or -1.
func (c *Cluster) StreamLeader(stream string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.servers) == 1 {
		if c.servers[0] == nil {
			return -1
		}
		return 0
	}
	for i, s := range c.servers {
		if s != nil && s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return i
		}
	}
	return -1
}

// SlowConsumers returns how many clients the running servers have cut off
// (or found) as slow consumers since they started.
func (c *Cluster) SlowConsumers() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, s := range c.servers {
		if s != nil {
			n += s.NumSlowConsumers()
		}
	}
	return n
}

// StreamCurrent reports whether server i runs and its replica of stream is
// current with the leader.
func (c *Cluster) StreamCurrent(i int, stream string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.servers[i]
	return s != nil && s.JetStreamIsStreamCurrent(server.DEFAULT_GLOBAL_ACCOUNT, stream)
}

// Stop shuts server i down (a graceful stop: it may hand its leaderships
// over); its store stays on disk for Restart.
func (c *Cluster) Stop(i int) {
	c.mu.Lock()
	s := c.servers[i]
	c.servers[i] = nil
	c.mu.Unlock()
	if s != nil {
		s.Shutdown()
		s.WaitForShutdown()
	}
}

// Restart starts server i again on its store and ports.
func (c *Cluster) Restart(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.servers[i] != nil {
		return nil
	}
	s, err := server.NewServer(c.opts[i].Clone())
	if err != nil {
		return err
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		s.WaitForShutdown()
		return errors.New("natsjstest: restarted server not ready in 10s")
	}
	c.servers[i] = s
	return nil
}

// Shutdown stops every server. Idempotent.
func (c *Cluster) Shutdown() {
	for i := range c.servers {
		c.Stop(i)
	}
}

// clusterPorts checks n (1 to 7 servers) and takes 2n free ports on
// 127.0.0.1: server i listens for clients on ports[i] and for routes on
// ports[n+i], whose URL is routes[i]. Route ports must be known before any
// server starts, and client ports stay the same across a restart. (Another
// process could grab one meanwhile; starting then fails.)
func clusterPorts(n int) (ports []int, routes []string, err error) {
	if n < 1 || n > 7 {
		return nil, nil, fmt.Errorf("natsjstest: %d servers", n)
	}
	if ports, err = freePorts(2 * n); err != nil {
		return nil, nil, err
	}
	for i := range n {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[n+i]))
	}
	return ports, routes, nil
}

// freePorts returns k distinct free ports on 127.0.0.1.
func freePorts(k int) ([]int, error) {
	ports := make([]int, k)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close() // held until all are chosen: no repeats
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}
