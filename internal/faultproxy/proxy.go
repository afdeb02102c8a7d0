// Package faultproxy is a loopback TCP proxy for tests that breaks
// connections on demand: it cuts them, refuses new ones, stalls them, and
// delays what flows back to the client. It puts real sockets, with real
// kernel buffers, between a producer and a broker.
package faultproxy

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inflightmq/inflight/transport/mem"
)

// Proxy forwards connections from its own address to a target address. Its
// methods are safe for concurrent use. Close stops it and waits for every
// goroutine it started.
type Proxy struct {
	ln     net.Listener
	target string

	refuse atomic.Bool
	delay  atomic.Int64 // ns added to each chunk toward the client
	stall  mem.Gate     // stalled: nothing flows toward the server

	mu     sync.Mutex
	conns  map[*pair]struct{}
	closed bool
	wg     sync.WaitGroup
}

type pair struct {
	client, server net.Conn
	once           sync.Once
	done           chan struct{} // closed by close
}

func (p *pair) close() {
	p.once.Do(func() {
		p.client.Close()
		p.server.Close()
		close(p.done)
	})
}

// New listens on 127.0.0.1 (a free port) and forwards to target.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[*pair]struct{})}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr returns the address clients dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every open connection.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.close()
	}
}

// Refuse makes new connections close as soon as they are accepted.
func (p *Proxy) Refuse(on bool) { p.refuse.Store(on) }

// Stall stops forwarding toward the server while on (the client's writes
// pile up in socket buffers, then block).
func (p *Proxy) Stall(on bool) { p.stall.Stall(on) }

// Delay holds each chunk flowing back to the client for d (0: none).
func (p *Proxy) Delay(d time.Duration) { p.delay.Store(int64(d)) }

// Close stops accepting, cuts every connection and waits for the proxy's
// goroutines. Idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Cut()
	p.stall.Stall(false)
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.refuse.Load() {
			c.Close()
			continue
		}
		s, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			c.Close()
			continue
		}
		pr := &pair{client: c, server: s, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			pr.close()
			return
		}
		p.conns[pr] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(pr, c, s, true) })
		p.wg.Go(func() {
			p.pipe(pr, s, c, false)
			<-pr.done
			p.mu.Lock()
			delete(p.conns, pr)
			p.mu.Unlock()
		})
	}
}

// pipe copies from src to dst until either side fails, then closes both.
func (p *Proxy) pipe(pr *pair, src, dst net.Conn, toServer bool) {
	defer pr.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if toServer {
				if !p.stall.Wait(pr.done) {
					return // cut while stalled
				}
			} else if d := p.delay.Load(); d > 0 {
				time.Sleep(time.Duration(d))
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a cut: either way the pair is done
		}
	}
}
