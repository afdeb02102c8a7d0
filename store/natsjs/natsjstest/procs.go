package natsjstest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Procs is n nats-server processes joined in a cluster on 127.0.0.1: a
// server can be killed with SIGKILL (a crash, no leader stepdown) and
// restarted on its store. Its methods are safe for concurrent use.
type Procs struct {
	bin   string
	dir   string
	args  [][]string
	ports []int

	mu    sync.Mutex
	procs []*exec.Cmd // nil once killed
}

// StartProcs starts n servers from the nats-server binary bin with their
// stores and logs under dir, and waits until JetStream answers, at most
// 30 s. The caller stops them with Shutdown.
func StartProcs(bin, dir string, n int) (*Procs, error) {
	ports, routes, err := clusterPorts(n)
	if err != nil {
		return nil, err
	}
	p := &Procs{bin: bin, dir: dir, ports: ports[:n], procs: make([]*exec.Cmd, n)}
	for i := range n {
		args := []string{"-a", "127.0.0.1", "-p", fmt.Sprint(ports[i]), "-n", fmt.Sprintf("n%d", i),
			"-js", "-sd", filepath.Join(dir, fmt.Sprintf("n%d", i))}
		if n > 1 {
			args = append(args, "--cluster_name", "inflight", "--cluster", routes[i], "--routes", strings.Join(routes, ","))
		}
		p.args = append(p.args, args)
	}
	for i := range n {
		if err := p.Restart(i); err != nil {
			p.Shutdown()
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.waitJetStream(ctx); err != nil {
		p.Shutdown()
		return nil, err
	}
	return p, nil
}

func (p *Procs) waitJetStream(ctx context.Context) error {
	nc, err := nats.Connect(p.URLs(), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	for {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := js.AccountInfo(actx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("natsjstest: JetStream not ready: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// URLs returns the client URLs of every server, running or not.
func (p *Procs) URLs() string {
	var u []string
	for _, port := range p.ports {
		u = append(u, fmt.Sprintf("nats://127.0.0.1:%d", port))
	}
	return strings.Join(u, ",")
}

// Pid returns the process ID of server i, or 0 if it is not running.
func (p *Procs) Pid(i int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.procs[i] == nil {
		return 0
	}
	return p.procs[i].Process.Pid
}

// Kill9 kills server i with SIGKILL (this process only) and reaps it.
func (p *Procs) Kill9(i int) {
	p.mu.Lock()
	cmd := p.procs[i]
	p.procs[i] = nil
	p.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// Restart starts server i (again) on its store and ports, and waits until
// it accepts connections, at most 10 s.
func (p *Procs) Restart(i int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.procs[i] != nil {
		return nil
	}
	log, err := os.OpenFile(filepath.Join(p.dir, fmt.Sprintf("n%d.log", i)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close() // the child has its own descriptor
	cmd := exec.Command(p.bin, p.args[i]...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", p.ports[i]), nats.NoReconnect())
		if err == nil {
			nc.Close()
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return errors.New("natsjstest: restarted nats-server not reachable in 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.procs[i] = cmd
	return nil
}

// StreamLeader returns the index of the server leading stream, asking the
// cluster through nc, or -1 (no leader, or no answer within a second).
func (p *Procs) StreamLeader(js jetstream.JetStream, stream string) int {
	ci := streamCluster(js, stream)
	if ci == nil || ci.Leader == "" {
		return -1
	}
	var i int
	if _, err := fmt.Sscanf(ci.Leader, "n%d", &i); err != nil || i < 0 || i >= len(p.procs) || p.Pid(i) == 0 {
		return -1
	}
	return i
}

// ReplicasCurrent reports whether every replica of stream is online and
// current, asking through js.
func (p *Procs) ReplicasCurrent(js jetstream.JetStream, stream string) bool {
	ci := streamCluster(js, stream)
	if ci == nil || ci.Leader == "" || len(ci.Replicas) != len(p.procs)-1 {
		return false
	}
	for _, r := range ci.Replicas {
		if !r.Current || r.Offline {
			return false
		}
	}
	return true
}

// streamCluster returns what the cluster says of stream through js, or nil
// (no answer within a second, or not clustered).
func streamCluster(js jetstream.JetStream, stream string) *jetstream.ClusterInfo {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil
	}
	return s.CachedInfo().Cluster
}

// Shutdown kills every server. Idempotent.
func (p *Procs) Shutdown() {
	for i := range p.procs {
		p.Kill9(i)
	}
}
