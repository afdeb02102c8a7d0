package mem

import "sync"

// Gate is a switch that goroutines wait on: it holds them in Wait while it
// is stalled. It is the switch behind Dialer.StallWrites, exported for
// fault injectors of other transports (the project's TCP fault proxy stalls
// its connections with it). The zero Gate is open. Its methods are safe for
// concurrent use.
type Gate struct {
	mu      sync.Mutex
	stalled bool
	resume  chan struct{} // closed when the gate opens again
}

// Stall closes the gate (on) or opens it (off), releasing every waiter.
func (g *Gate) Stall(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if on == g.stalled {
		return
	}
	g.stalled = on
	if on {
		g.resume = make(chan struct{})
	} else {
		close(g.resume)
	}
}

// Wait returns true once the gate is open (at once if it is), or false if
// done is closed first.
func (g *Gate) Wait(done <-chan struct{}) bool {
	for {
		g.mu.Lock()
		stalled, resume := g.stalled, g.resume
		g.mu.Unlock()
		if !stalled {
			return true
		}
		select {
		case <-resume:
		case <-done:
			return false
		}
	}
}
