//go:build linux

// Command hostile measures a broker under hostile clients: its resident
// memory (RSS) with N connections of each kind below, and a legitimate
// producer's throughput meanwhile, beside a quiet run; and how long an
// unauthenticated connection lives. Linux only (it reads /proc).
//
//	go run ./bench/hostile                   # N = 200 and 2000, 5s per run
//	go run ./bench/hostile -conns 200 -duration 3s
//
// The broker runs in a child process of its own (this program, with
// -broker), on a store that counts records and keeps none, with the
// server's defaults, so that its RSS is the broker's alone. The hostile
// connections run in another (-attack), at the lowest CPU priority (nice
// 19), as if from other machines: the producer competes with the broker's
// work for them, not with theirs. The kinds of hostile connection, each
// reconnecting a second after it was closed:
//
//	pre-hello  connects and PINGs once a second, never sending a HELLO
//	silent     connects and sends nothing
//	bomb       HELLO, one BATCH of a few hundred bytes of zstd whose 4,000
//	           records decode to 4 MiB, then a PING a second
//	slowloris  HELLO, then a BATCH header that claims 1 MiB and 100 bytes of
//	           it every 500ms
//
// The producer (core over transport/stdnet, default options) sends
// 100-byte messages as fast as the broker acknowledges them.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/server"
	"github.com/inflightmq/inflight/transport/stdnet"
	"github.com/inflightmq/inflight/wire"
)

func main() {
	child := flag.Bool("broker", false, "run the broker (a child process)")
	attacker := flag.String("attack", "", "run KIND,N,ADDR hostile connections (a child process)")
	conns := flag.String("conns", "200,2000", "numbers of hostile connections, comma-separated")
	kinds := flag.String("kinds", "pre-hello,silent,bomb,slowloris", "kinds of hostile connection")
	duration := flag.Duration("duration", 5*time.Second, "how long each run lasts")
	flag.Parse()
	if *child {
		runBroker()
		return
	}
	if *attacker != "" {
		runAttack(*attacker)
		return
	}
	var ns []int
	for _, s := range strings.Split(*conns, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			fatal(fmt.Errorf("-conns: %q", s))
		}
		ns = append(ns, n)
	}
	fmt.Printf("broker: server defaults (HandshakeTimeout %v, MaxPendingConns %d, MaxConns %d), MaxBufferedBytes %d MiB; %v per run\n\n",
		server.DefaultHandshakeTimeout, server.DefaultMaxPendingConns, server.DefaultMaxConns, broker.DefaultMaxBufferedBytes>>20, *duration)
	// Quiet runs first and last, the machine's own drift between them.
	var results []*result
	for _, kind := range strings.Split(*kinds, ",") {
		for _, n := range ns {
			results = append(results, run(kind, n, *duration))
		}
	}
	q1 := run("quiet", 0, *duration)
	q2 := run("quiet", 0, *duration)
	quiet := (q1.rate + q2.rate) / 2
	fmt.Printf("quiet: the producer alone, %.0f and %.0f msgs/s (mean %.0f)\n", q1.rate, q2.rate, quiet)
	q1.print(quiet)
	for _, r := range results {
		r.print(quiet)
	}
	fmt.Println()
	closedAfter("silent", nil)
	closedAfter("pre-hello", wire.AppendPing(nil, wire.Ping{Nonce: 1}))
}

// result is one run's figures.
type result struct {
	kind            string
	n               int
	rate            float64 // the producer's acknowledged messages per second
	rssEnd, rssPeak int64   // the broker's, in KiB
	closed          []time.Duration
	stats           childStats
}

func (r *result) print(quiet float64) {
	line := fmt.Sprintf("%-10s %5d conns: broker RSS %4d MiB (peak %4d MiB, live heap+stacks %5.1f MiB); producer %7.0f msgs/s (%3.0f%% of quiet)",
		r.kind, r.n, r.rssEnd>>10, r.rssPeak>>10, float64(r.stats.Live)/(1<<20), r.rate, 100*r.rate/quiet)
	line += fmt.Sprintf("; %d open", r.stats.Server.Conns)
	if len(r.closed) > 0 && (r.kind == "pre-hello" || r.kind == "silent") {
		slices.Sort(r.closed)
		line += fmt.Sprintf(", closed after p50 %v", r.closed[len(r.closed)/2].Round(time.Millisecond))
	}
	s := r.stats
	line += fmt.Sprintf("; refused: conns %d pending %d handshake timeouts %d, protocol errors %d, timeouts %d, buffer waits %d",
		s.Server.Refused, s.Server.RefusedPending, s.Server.HandshakeTimeouts, s.Server.Errors, s.Server.Timeouts, s.Broker.BufferWaits)
	fmt.Println(line)
}

// run starts a broker, n hostile connections of kind and the producer, for
// d, and returns the figures.
func run(kind string, n int, d time.Duration) *result {
	b := startChild("-broker")
	defer b.stop()
	r := &result{kind: kind, n: n}
	var a *child
	if n > 0 {
		a = startChild("-attack", fmt.Sprintf("%s,%d,%s", kind, n, b.addr))
		defer a.stop()
		time.Sleep(2 * time.Second) // the attack in place
	}
	r.rate = produce(b.addr, d)
	r.rssEnd, r.rssPeak = b.rss("VmRSS"), b.rss("VmHWM")
	if err := json.Unmarshal(b.query(), &r.stats); err != nil { // the hostile connections still open
		fatal(err)
	}
	if a != nil {
		var ms []int64
		if err := json.Unmarshal(a.query(), &ms); err != nil {
			fatal(err)
		}
		for _, m := range ms {
			r.closed = append(r.closed, time.Duration(m)*time.Microsecond)
		}
	}
	return r
}

// runAttack is the attackers' child: spec is KIND,N,ADDR. At each line on
// stdin it prints how long the connections closed so far lived, in
// microseconds, as JSON; at the end of stdin it stops.
func runAttack(spec string) {
	parts := strings.SplitN(spec, ",", 3)
	if len(parts) != 3 {
		fatal(fmt.Errorf("-attack %q", spec))
	}
	kind, addr := parts[0], parts[2]
	n, err := strconv.Atoi(parts[1])
	if err != nil {
		fatal(err)
	}
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, 0, 19) // best effort
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	closed := []int64{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			attack(ctx, kind, addr, i, func(d time.Duration) {
				mu.Lock()
				closed = append(closed, d.Microseconds())
				mu.Unlock()
			})
		})
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		mu.Lock()
		out, _ := json.Marshal(closed)
		mu.Unlock()
		fmt.Println(string(out))
	}
	cancel()
	wg.Wait()
}

// produce sends 100-byte messages for d and returns the acknowledged rate.
func produce(addr string, d time.Duration) float64 {
	dl, err := stdnet.NewDialer(addr)
	if err != nil {
		fatal(err)
	}
	defer dl.Close()
	p, err := core.New(dl, core.Name("legit"))
	if err != nil {
		fatal(err)
	}
	var acked atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	payload := make([]byte, 100)
	for ctx.Err() == nil {
		_ = p.SendAsync(ctx, &core.Message{Payload: payload}, func(_ core.MessageID, _ *core.Message, err error) {
			if err == nil {
				acked.Add(1)
			}
		})
	}
	n := acked.Load()
	rate := float64(n) / time.Since(start).Seconds()
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	_ = p.Close(cctx)
	return rate
}

// attack runs one hostile connection of kind, reconnecting a second after
// each close, until ctx ends. It tells closed how long each connection the
// broker closed lived after it connected.
func attack(ctx context.Context, kind, addr string, i int, closed func(time.Duration)) {
	for ctx.Err() == nil {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err == nil {
			stop := context.AfterFunc(ctx, func() { c.Close() })
			start := time.Now()
			if attackOnce(ctx, kind, c, i) && ctx.Err() == nil {
				closed(time.Since(start))
			}
			stop()
			c.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

var bomb = func() []byte {
	var bb wire.BatchBuilder
	bb.Reset(nil, 0, 1) // topic id 0, declared by attackOnce
	rec := make([]byte, 1000)
	for bb.Size()+wire.RecordOverhead(len(rec))+len(rec) <= wire.DefaultMaxFrameSize-64 {
		bb.Add(rec)
	}
	c, err := wire.NewCompressor(wire.CodecZstd, wire.LevelBetter)
	if err != nil {
		fatal(err)
	}
	f, _ := bb.FinishCompressed(c, nil)
	return f
}()

// attackOnce plays kind on c until the broker closes it (it reports true:
// closed by the broker) or ctx ends.
func attackOnce(ctx context.Context, kind string, c net.Conn, i int) bool {
	r := bufio.NewReader(c)
	ping := wire.AppendPing(nil, wire.Ping{Nonce: 1})
	switch kind {
	case "silent":
		_, err := io.Copy(io.Discard, r)
		return err == nil
	case "pre-hello":
		for ctx.Err() == nil {
			if _, err := c.Write(ping); err != nil {
				return true
			}
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			if _, err := io.Copy(io.Discard, r); err == nil {
				return true // EOF: closed
			} else if !errors.Is(err, os.ErrDeadlineExceeded) {
				return true
			}
		}
		return false
	}
	h, _ := wire.AppendHello(nil, wire.Hello{Version: wire.Version, MaxFrameSize: wire.DefaultMaxFrameSize,
		Producer: fmt.Sprintf("%s-%d-%d", kind, i, time.Now().UnixNano())})
	t, _ := wire.AppendTopic(nil, wire.Topic{ID: 0, Name: wire.DefaultTopic})
	if _, err := c.Write(append(h, t...)); err != nil || readFrame(r) != wire.TypeHelloOK || readFrame(r) != wire.TypeTopicOK {
		return true
	}
	switch kind {
	case "bomb":
		if _, err := c.Write(bomb); err != nil || readFrame(r) != wire.TypeReceipt {
			return true
		}
		for ctx.Err() == nil {
			time.Sleep(time.Second)
			if _, err := c.Write(ping); err != nil || readFrame(r) != wire.TypePong {
				return true
			}
		}
	case "slowloris":
		hdr := []byte{0, 0x10, 0, 0, byte(wire.TypeBatch)} // 1 MiB claimed
		if _, err := c.Write(hdr); err != nil {
			return true
		}
		chunk := make([]byte, 100)
		for ctx.Err() == nil {
			time.Sleep(500 * time.Millisecond)
			if _, err := c.Write(chunk); err != nil {
				return true
			}
		}
	default:
		fatal(fmt.Errorf("unknown kind %q", kind))
	}
	return false
}

// readFrame reads one frame and returns its type (0 on error).
func readFrame(r *bufio.Reader) wire.Type {
	var prefix [4]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return 0
	}
	size, _ := wire.FrameSize(prefix[:])
	buf := make([]byte, size)
	copy(buf, prefix[:])
	if _, err := io.ReadFull(r, buf[4:]); err != nil {
		return 0
	}
	t, err := wire.TypeOf(buf)
	if err != nil {
		return 0
	}
	return t
}

// closedAfter prints how long a broker keeps a connection that sends first
// (nil: nothing) and never a HELLO.
func closedAfter(kind string, first []byte) {
	b := startChild("-broker")
	defer b.stop()
	c, err := net.Dial("tcp", b.addr)
	if err != nil {
		fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if first != nil {
		_, _ = c.Write(first)
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	_, err = io.Copy(io.Discard, c)
	fmt.Printf("a %s connection (no HELLO) is closed after %v (err %v)\n", kind, time.Since(start).Round(time.Millisecond), err)
}

// childStats is what the broker reports when it stops.
type childStats struct {
	Server server.Stats
	Broker broker.Stats
	Live   uint64 // heap in use and goroutine stacks after two GCs, connections still open
}

// child is a broker or attackers' process.
type child struct {
	cmd  *exec.Cmd
	addr string
	in   io.WriteCloser
	out  *bufio.Reader
	once sync.Once
}

// startChild starts this program with args; a broker prints its address
// first.
func startChild(args ...string) *child {
	self, err := os.Executable()
	if err != nil {
		fatal(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		fatal(err)
	}
	if err := cmd.Start(); err != nil {
		fatal(err)
	}
	c := &child{cmd: cmd, in: in, out: bufio.NewReader(out)}
	if args[0] == "-broker" {
		line, err := c.out.ReadString('\n')
		if err != nil {
			fatal(fmt.Errorf("broker: %w", err))
		}
		c.addr = strings.TrimSpace(line)
	}
	return c
}

// rss returns field (VmRSS, VmHWM) of the child's /proc status, in KiB.
func (c *child) rss(field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// query asks the child for its figures, a line of JSON.
func (c *child) query() []byte {
	if _, err := io.WriteString(c.in, "stats\n"); err != nil {
		fatal(err)
	}
	line, err := c.out.ReadBytes('\n')
	if err != nil {
		fatal(err)
	}
	return line
}

// stop ends the child; later calls do nothing.
func (c *child) stop() {
	c.once.Do(func() {
		_ = c.in.Close()
		_ = c.cmd.Wait()
	})
}

// runBroker is the child: a broker on a counting store, its address on
// stdout; for each line on stdin, its counters as JSON on stdout; at the
// end of stdin it closes.
func runBroker() {
	b, err := broker.New(broker.NewCountingStore())
	if err != nil {
		fatal(err)
	}
	srv, err := server.New("127.0.0.1:0", b)
	if err != nil {
		fatal(err)
	}
	fmt.Println(srv.Addr())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		st := childStats{Server: srv.Stats(), Broker: b.Stats()}
		runtime.GC()
		runtime.GC() // pools keep what they drop for one cycle
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		st.Live = m.HeapAlloc + m.StackInuse
		out, _ := json.Marshal(st)
		fmt.Println(string(out))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Close(ctx)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "hostile:", err)
	os.Exit(1)
}
