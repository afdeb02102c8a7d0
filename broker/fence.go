package broker

// Fencing: one writer per producer name, across all its topics. Each
// Producer instance is an incarnation of its name with an epoch the broker
// gives it: its first HELLO asks for one (epoch 0), the broker stores the
// name's epoch + 1 with Store.Fence before its HELLO_OK says so, and the
// instance's reconnects present it. The Store refuses the Appends of every
// lower epoch on every topic of the name, including topics the newer
// incarnation never declared.
//
//	HELLO epoch        stored epoch s      answer
//	0, instance of     s                   HELLO_OK(s): the same Producer redialed (its first HELLO's
//	  the holder                           admission came late); the older session is replaced
//	0                  any                 Fence(s+1), HELLO_OK(s+1); a live session of this broker
//	                                       holding the name is fenced on all its topics (ERROR
//	                                       fenced, closed)
//	0, Yield           any, name held      ERROR name in use (the producer retries later)
//	e > 0              e                   HELLO_OK(e): a reconnect; an older session of the same
//	                                       incarnation is replaced (closed without an ERROR)
//	e > 0              s > e               ERROR fenced (saying so when the Store forgot the name:
//	                                       NameState.Forgotten)
//	e > 0              s < e               Fence(e): the Store lost the name's epoch (a memory
//	                                       store restarted, a forgotten name); the producer is
//	                                       the newest incarnation anyone knows of
//
// This broker's copy of s may be behind the Store when another broker
// (a gateway on the same JetStream stream) fenced since: a Fence that the
// Store refuses makes it read the state again and try above it, a TOPIC
// whose Store.State shows an epoch above the session's ends the session
// as fenced, and so does an Append the Store refuses.
//
// All of this runs on the session's HELLO goroutine, never on its reader:
// a Fence that takes seconds holds up that HELLO (and the HELLOs of the same
// name, which wait for the name's lock), not the connection's PINGs nor
// other connections.

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/inflightmq/inflight/wire"
)

// nameState is what this broker knows of one producer name while a session
// holds it. mu serializes the name's HELLOs (it is held during their
// Store.State and Store.Fence), so two HELLOs of one name see one
// consistent epoch and owner.
type nameState struct {
	mu sync.Mutex
	// owner is the session that holds the name: set under mu, read by
	// appenders without it (an Append of a session that no longer owns
	// the name is refused with ErrReplaced).
	owner   atomic.Pointer[Session]
	ownerID Identity // owner's identity
	epoch   uint64   // the name's newest epoch, as this broker knows it (another may have fenced since)
	// instance is the wire.Hello.Instance of the Producer this broker gave
	// epoch, or admitted at it (0: none known).
	instance uint64
	loaded   bool // epoch was read from the Store (false: read it again)
	forgot   bool // the Store had forgotten the name when it was read (NameState.Forgotten)
	dead     bool // removed from the broker's map; look the name up again
}

// maxFenceTries bounds how often a HELLO tries to fence when other brokers
// fence the same name at the same time.
const maxFenceTries = 8

// withName runs fn with the state of name locked, creating the state if
// needed, and returns fn's error. It may wait for another HELLO of the
// name, and so must not run on a reader.
func (b *Broker) withName(name string, fn func(*nameState) error) error {
	for {
		b.mu.Lock()
		ps := b.names[name]
		if ps == nil {
			ps = &nameState{}
			b.names[name] = ps
		}
		b.mu.Unlock()
		ps.mu.Lock()
		if !ps.dead {
			defer ps.mu.Unlock()
			return fn(ps)
		}
		// Removed from the map while we waited for its lock.
		ps.mu.Unlock()
	}
}

// release forgets name's state if s still owns it (s nil: if nobody owns
// it), so that a broker serving many short-lived producers does not grow
// without bound. The Store keeps what matters (the epoch) for the next
// HELLO.
//
// When s held the name, its pin (see Pinner) goes, after the locks: a
// store's Unpin may wait for its own lock (a roll's fsync) and must hold
// up no HELLO. A HELLO that takes the name meanwhile pins it again first.
func (b *Broker) release(name string, ps *nameState, s *Session) {
	b.mu.Lock()
	ps.mu.Lock()
	unpin := false
	if ps.owner.Load() == s {
		ps.owner.Store(nil)
		ps.dead = true
		if b.names[name] == ps {
			delete(b.names, name)
		}
		unpin = s != nil
	}
	ps.mu.Unlock()
	b.mu.Unlock()
	if p, ok := b.store.(Pinner); ok && unpin {
		p.Unpin(name) // pinned when s took the name (admitHello)
	}
}

// admit decides, under p's lock, what a HELLO of name gets (see the top of
// this file): nil, and p's epoch is what its HELLO_OK says; or an error
// wrapping ErrFenced, ErrNameInUse or ErrStore.
func (b *Broker) admit(name string, p *nameState, h *wire.Hello) error {
	if !p.loaded || h.Epoch > p.epoch {
		// Another broker may have fenced since this one read the state.
		if err := b.load(name, p); err != nil {
			return err
		}
	}
	switch {
	case h.Epoch == 0 && h.Instance != 0 && h.Instance == p.instance && p.epoch != 0 && p.owner.Load() != nil:
		// The Producer that holds the name redialed before it heard the
		// answer to its first HELLO, whose admission came after this
		// one's: the same incarnation, not a new one.
		return nil
	case h.Epoch == 0:
		if h.Yield && p.owner.Load() != nil {
			return fmt.Errorf("%w: producer %q is held by a live session (epoch %d)", ErrNameInUse, name, p.epoch)
		}
		return b.fence(name, p, 0)
	case h.Epoch < p.epoch && p.forgot:
		return fmt.Errorf("%w: producer %q: the store forgot this name (no session held it for longer than the store keeps idle producers), "+
			"and epoch %d with it: the records this instance stored stay stored, it may store no more; start a new instance",
			ErrFenced, name, h.Epoch)
	case h.Epoch < p.epoch:
		return fencedErr(name, h.Epoch, p.epoch)
	case h.Epoch == p.epoch:
		return nil
	default:
		return b.fence(name, p, h.Epoch)
	}
}

// fence stores epoch want for name, or, for want 0, the epoch above the
// stored one, and sets p's epoch. When the Store refuses (another broker
// fenced meanwhile) it reads the state again and tries above it, up to
// maxFenceTries times; for want > 0 the producer is then fenced.
func (b *Broker) fence(name string, p *nameState, want uint64) error {
	for try := 1; ; try++ {
		epoch := want
		if epoch == 0 {
			if p.epoch == math.MaxUint64 {
				return fmt.Errorf("%w: producer %q has used every epoch", ErrStore, name)
			}
			epoch = p.epoch + 1
		}
		err := b.store.Fence(name, epoch)
		if err == nil {
			p.epoch, p.forgot = epoch, false
			return nil
		}
		if !errors.Is(err, ErrFenced) || try == maxFenceTries {
			return fmt.Errorf("%w: %w", ErrStore, err)
		}
		if err := b.load(name, p); err != nil {
			return err
		}
		if want != 0 && p.epoch >= want {
			return fencedErr(name, want, p.epoch)
		}
	}
}

// load reads name's epoch from the Store into p. The Store keeps one epoch
// per name whatever the topic: State of wire.DefaultTopic says it.
func (b *Broker) load(name string, p *nameState) error {
	st, err := b.store.State(wire.DefaultTopic, name)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStore, err)
	}
	p.epoch, p.loaded, p.forgot = st.Epoch, true, st.Forgotten
	return nil
}

// fencedErr is the refusal of epoch e of a name whose epoch is newer.
func fencedErr(name string, e, newer uint64) error {
	return fmt.Errorf("%w: producer %q: epoch %d, but epoch %d holds the name", ErrFenced, name, e, newer)
}

// takeOver ends old, the session that held the name s now holds, on every
// topic it declared: a session of an older incarnation is fenced (an ERROR
// frame of code wire.CodeFenced tells its producer to stop), one of the
// same incarnation is replaced (its producer reconnected before the old
// connection was seen dead). Either way its appenders store nothing more
// and its peer is closed. Called on s's HELLO goroutine, without the
// name's lock.
func (s *Session) takeOver(old *Session, oldEpoch uint64) {
	s.b.takeovers.Add(1)
	if oldEpoch == s.epoch {
		old.abort(ErrReplaced)
		_ = old.peer.Close()
		return
	}
	s.b.fenced.Add(1)
	err := fmt.Errorf("%w: producer %q: epoch %d took the name over from epoch %d", ErrFenced, s.name, s.epoch, oldEpoch)
	old.abort(err)
	_ = old.peer.Send(wire.AppendError(nil, wire.Error{Code: wire.CodeFenced, Text: wire.Reason(err)}))
	_ = old.peer.Close()
}
