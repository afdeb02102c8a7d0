package broker

// Fencing: one writer per producer name. Each Producer instance is an
// incarnation of its name with an epoch the broker gives it: its first
// HELLO asks for one (epoch 0), the broker stores the name's epoch + 1 with
// Store.Fence before its HELLO_OK says so, and the instance's reconnects
// present it. The Store refuses the Appends of every lower epoch.
//
//	HELLO epoch        stored epoch s      answer
//	0                  any                 Fence(s+1), HELLO_OK(s+1); a live session of this broker
//	                                       holding the name is fenced (ERROR fenced, closed)
//	0, Yield           any, name held      ERROR name in use (the producer retries later)
//	e > 0              e                   HELLO_OK(e): a reconnect; an older session of the same
//	                                       incarnation is replaced (closed without an ERROR)
//	e > 0              s > e               ERROR fenced
//	e > 0              s < e               Fence(e): the Store lost the name's epoch (a memory
//	                                       store restarted, a forgotten name); the producer is
//	                                       the newest incarnation anyone knows of
//
// This broker's copy of s may be behind the Store when another broker
// (a gateway on the same JetStream stream) fenced since: a Fence that the
// Store refuses makes it read the state again and try above it, and an
// Append the Store refuses ends the session as fenced.

import (
	"errors"
	"fmt"
	"math"

	"github.com/inflightmq/inflight/wire"
)

// maxFenceTries bounds how often a HELLO tries to fence when other brokers
// fence the same name at the same time.
const maxFenceTries = 8

// admit decides, under p's lock, what a HELLO of name gets (see the top of
// this file): nil, and p's last and epoch are what its HELLO_OK says; or an
// error wrapping ErrFenced, ErrNameInUse or ErrStore.
func (b *Broker) admit(name stream, p *producerState, h *wire.Hello) error {
	fresh := !p.loaded
	if fresh {
		if err := b.load(name, p); err != nil {
			return err
		}
	}
	if h.Epoch > p.epoch && !fresh {
		// Another broker may have fenced since this one read the state.
		if err := b.load(name, p); err != nil {
			return err
		}
	}
	switch {
	case h.Epoch == 0:
		if h.Yield && p.owner != nil {
			return fmt.Errorf("%w: producer %q of topic %q is held by a live session (epoch %d)", ErrNameInUse, name.producer, name.topic, p.epoch)
		}
		return b.fence(name, p, 0)
	case h.Epoch < p.epoch:
		return b.fencedErr(name, h.Epoch, p.epoch)
	case h.Epoch == p.epoch:
		return nil
	default:
		return b.fence(name, p, h.Epoch)
	}
}

// fence stores epoch want for name, or, for want 0, the epoch above the
// stored one, and sets p's last and epoch from the Store. When the Store
// refuses (another broker fenced meanwhile) it reads the state again and
// tries above it, up to maxFenceTries times; for want > 0 the producer is
// then fenced.
func (b *Broker) fence(name stream, p *producerState, want uint64) error {
	for try := 1; ; try++ {
		epoch := want
		if epoch == 0 {
			if p.epoch == math.MaxUint64 {
				return fmt.Errorf("%w: producer %q of topic %q has used every epoch", ErrStore, name.producer, name.topic)
			}
			epoch = p.epoch + 1
		}
		err := b.store.Fence(name.producer, epoch)
		if err == nil {
			// The fence holds every topic of the name: nothing older lands
			// on this topic after it, so its last sequence ID is read once.
			st, err := b.store.State(name.topic, name.producer)
			if err != nil {
				return fmt.Errorf("%w: %w", ErrStore, err)
			}
			if st.Epoch > epoch {
				return b.fencedErr(name, epoch, st.Epoch)
			}
			p.last, p.epoch, p.loaded = st.LastSeq, epoch, true
			return nil
		}
		if !errors.Is(err, ErrFenced) || try == maxFenceTries {
			return fmt.Errorf("%w: %w", ErrStore, err)
		}
		if err := b.load(name, p); err != nil {
			return err
		}
		if want != 0 && p.epoch >= want {
			return b.fencedErr(name, want, p.epoch)
		}
	}
}

// load reads name's last seq and epoch from the Store into p.
func (b *Broker) load(name stream, p *producerState) error {
	st, err := b.store.State(name.topic, name.producer)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStore, err)
	}
	p.last, p.epoch, p.loaded = st.LastSeq, st.Epoch, true
	return nil
}

// fencedErr is the refusal of a HELLO of epoch e for a name whose epoch is
// newer.
func (b *Broker) fencedErr(name stream, e, newer uint64) error {
	return fmt.Errorf("%w: producer %q of topic %q: epoch %d, but epoch %d holds the name", ErrFenced, name.producer, name.topic, e, newer)
}

// takeOver ends old, the session that held the name s now holds: a
// session of an older incarnation is fenced (an ERROR frame of code
// wire.CodeFenced tells its producer to stop), one of the same incarnation
// is replaced (its producer reconnected before the old connection was seen
// dead). Either way its appender stores nothing more and its peer is
// closed. Called on s's reader goroutine, without the name's lock.
func (s *Session) takeOver(old *Session, oldEpoch uint64) {
	s.b.takeovers.Add(1)
	if oldEpoch == s.epoch {
		old.q.fail(ErrReplaced, s.b)
		old.peer.Close()
		return
	}
	s.b.fenced.Add(1)
	err := fmt.Errorf("%w: producer %q of topic %q: epoch %d took the name over from epoch %d", ErrFenced, s.name, s.topic, s.epoch, oldEpoch)
	old.q.fail(err, s.b)
	_ = old.peer.Send(wire.AppendError(nil, wire.Error{Code: wire.CodeFenced, Text: err.Error()}))
	old.peer.Close()
}
