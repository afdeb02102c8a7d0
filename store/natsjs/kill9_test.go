package natsjs_test

import (
	"bufio"
	"context"
	"flag"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inflightmq/inflight/store/natsjs"
	"github.com/inflightmq/inflight/store/natsjs/natsjstest"
	"github.com/inflightmq/inflight/transport/mem"
	"github.com/inflightmq/inflight/transport/tcp"
)

// 100,000 records keep each of the three tests within about 30 s under
// -race on two cores (the native layout stores about 4-5 k records/s there).
var kill9Records = flag.Int("kill9.records", 100_000, "records sent in each SIGKILL test")

// build compiles pkg into the test's temporary directory.
func build(t *testing.T, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// TestNativeGatewayKill9: the producer writes over TCP to a gateway process
// (broker on the JetStream store), which is killed with SIGKILL twice; a new
// one starts on the same address each time. The producer reconnects, learns
// the last stored record from the stream and resends the rest: every
// success stored once, in order.
func TestNativeGatewayKill9(t *testing.T) {
	bin := build(t, "github.com/inflightmq/inflight/store/natsjs/internal/testgateway")
	c := startCluster(t, 3, natsjstest.Options{})
	ensureStream(t, c, natsjs.StreamConfig{Replicas: 3})
	storeURL := gatewayStoreURL(c)
	addr := freeAddr(t)
	start := func() *exec.Cmd { return startGateway(t, bin, addr, storeURL) }
	gw := start()
	defer func() { stopGateway(gw) }()
	d, err := tcp.NewDialer(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	n := *kill9Records
	p := newProducer(t, d, "gateway-kill9")
	o := newOutcome(n)
	t0 := time.Now()
	// Records are left to send after each SIGKILL, however fast the ones
	// before it are stored.
	sent, release := o.sendHeld(t, p, n, 100, n/2, n*7/8)
	for kill := range 2 {
		waitFor(t, 60*time.Second, "records stored", func() bool { return o.successes.Load() > int64(n/8*(2*kill+1)) })
		pid := gw.Process.Pid
		_ = gw.Process.Kill() // SIGKILL to this PID only
		_ = gw.Wait()
		t.Logf("SIGKILL gateway pid %d after %v, %d succeeded", pid, time.Since(t0).Round(time.Millisecond), o.successes.Load())
		release(kill + 1)
		gw = start()
	}
	<-sent
	closeProducer(t, p)
	t.Logf("%d records in %v over TCP through gateway processes, two SIGKILLs", n, time.Since(t0).Round(time.Millisecond))
	o.check(t, c, natsjs.Subject("inflight", testTopic, "gateway-kill9"))
}

// TestStreamLeaderKill9: the three NATS servers are processes; the stream
// leader is killed with SIGKILL (a crash: no stepdown), restarted, and the
// new leader killed in turn, while a producer writes through a broker on the
// store in this process. Every callback once, successes in order, each
// success stored once, in order.
func TestStreamLeaderKill9(t *testing.T) {
	bin := build(t, "github.com/nats-io/nats-server/v2")
	pc, err := natsjstest.StartProcs(bin, t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Shutdown()
	nc := connect(t, pc)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := natsjs.EnsureStream(ctx, js, natsjs.StreamConfig{Name: streamName, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	leader := func() int { return pc.StreamLeader(js, streamName) }
	waitFor(t, 30*time.Second, "a stream leader", func() bool { return leader() >= 0 })

	b, s := gateway(t, pc, natsjs.Config{Timeout: *storeTimeout}, nil)
	d := mem.NewDialer(b)
	defer d.Close()
	n := *kill9Records
	p := newProducer(t, d, "leader-kill9")
	o := newOutcome(n)
	t0 := time.Now()
	// Records are left for the new leader and for after the second
	// SIGKILL, however fast the first ones are stored.
	sent, release := o.sendHeld(t, p, n, 100, n*6/10, n*9/10)

	waitFor(t, 60*time.Second, "a tenth stored", func() bool { return o.successes.Load() >= int64(n/10) })
	first := leader()
	pid := pc.Pid(first)
	pc.Kill9(first)
	killed := time.Now()
	t.Logf("SIGKILL stream leader n%d (pid %d) after %v, %d succeeded", first, pid, time.Since(t0).Round(time.Millisecond), o.successes.Load())
	waitFor(t, 60*time.Second, "a new leader", func() bool { l := leader(); return l >= 0 && l != first })
	at := o.successes.Load()
	release(1)
	waitFor(t, 60*time.Second, "successes under the new leader", func() bool { return o.successes.Load() > at })
	t.Logf("writes resumed %v after the SIGKILL", time.Since(killed).Round(time.Millisecond))
	if err := pc.Restart(first); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "replicas current", func() bool { return pc.ReplicasCurrent(js, streamName) })
	second := leader()
	pid = pc.Pid(second)
	pc.Kill9(second)
	t.Logf("SIGKILL stream leader n%d (pid %d) after %v, %d succeeded", second, pid, time.Since(t0).Round(time.Millisecond), o.successes.Load())
	release(2)
	<-sent
	closeProducer(t, p)
	el := time.Since(t0)
	bs := b.Stats()
	t.Logf("%d records in %v with two crashes; broker: %d batches, %d stored, %d store errors; store %+v",
		n, el.Round(time.Millisecond), bs.Batches, bs.Stored, bs.ProtocolErrors, s.Stats())
	o.check(t, pc, s.Subject(testTopic, "leader-kill9"))
}

// gatewayStoreURL is the -store of a gateway process on c's stream.
func gatewayStoreURL(c servers) string {
	return "nats://" + strings.ReplaceAll(c.URLs(), "nats://", "") + "/" + streamName + "?replicas=3&create=false"
}

// startGateway starts the gateway binary bin on addr, on the stream at
// storeURL, and returns once it listens. A killed gateway's port may take a
// moment to be free again: it retries for a while.
func startGateway(t *testing.T, bin, addr, storeURL string) *exec.Cmd {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		cmd := exec.Command(bin, "-listen", addr, "-store", storeURL)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err == nil && strings.HasPrefix(line, "listening on") {
			return cmd
		}
		_ = cmd.Wait()
		if time.Now().After(deadline) {
			t.Fatalf("gateway did not start: %q %v", line, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stopGateway ends a gateway process gracefully.
func stopGateway(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
}

// TestDialerFailsOverBetweenGateways: two gateway processes on one stream;
// the producer's dialer is given both addresses. Each gateway in turn is
// killed with SIGKILL and not restarted until the producer has stored more
// through the other: so whichever it was on, it fails over to the other
// address at least once. Every callback once, each success stored once, in
// order.
func TestDialerFailsOverBetweenGateways(t *testing.T) {
	bin := build(t, "github.com/inflightmq/inflight/store/natsjs/internal/testgateway")
	c := startCluster(t, 3, natsjstest.Options{})
	ensureStream(t, c, natsjs.StreamConfig{Replicas: 3})
	storeURL := gatewayStoreURL(c)
	addrs := [2]string{freeAddr(t), freeAddr(t)}
	var gws [2]*exec.Cmd
	for i := range gws {
		gws[i] = startGateway(t, bin, addrs[i], storeURL)
	}
	defer func() {
		for _, gw := range gws {
			stopGateway(gw)
		}
	}()
	d, err := tcp.NewDialer(addrs[0] + "," + addrs[1])
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	n := *kill9Records
	p := newProducer(t, d, "gateway-failover")
	o := newOutcome(n)
	t0 := time.Now()
	// After each SIGKILL there are records left to go through the other
	// gateway, however fast the ones before it are stored.
	sent, release := o.sendHeld(t, p, n, 100, n/2, n*7/8)
	for i := range gws {
		waitFor(t, 60*time.Second, "records stored", func() bool { return o.successes.Load() > int64(n/8*(2*i+1)) })
		_ = gws[i].Process.Kill() // SIGKILL to this PID only
		_ = gws[i].Wait()
		release(i + 1)
		at := o.successes.Load()
		t.Logf("SIGKILL gateway %d (%s) after %v, %d succeeded", i, addrs[i], time.Since(t0).Round(time.Millisecond), at)
		waitFor(t, 60*time.Second, "successes through the other gateway", func() bool { return o.successes.Load() > at+int64(n/16) })
		gws[i] = startGateway(t, bin, addrs[i], storeURL)
	}
	<-sent
	closeProducer(t, p)
	reconnects := p.Stats().Reconnects
	t.Logf("%d records in %v, %d reconnects", n, time.Since(t0).Round(time.Millisecond), reconnects)
	if reconnects == 0 {
		t.Error("the producer never failed over")
	}
	o.check(t, c, natsjs.Subject("inflight", testTopic, "gateway-failover"))
}

// freeAddr returns a 127.0.0.1 address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
