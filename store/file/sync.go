package file

// The Store's durability machinery: the group commit of FsyncBatch, the
// FsyncInterval goroutine, and fsyncing a new file's directory.

import (
	"fmt"
	"sync"
	"time"

	"github.com/inflightmq/inflight/broker"
)

// syncLocked returns once the file is written and fsynced at least up to
// target, or the store failed. Called with f.mu held. It is the group
// commit: the first caller to find no commit in progress becomes its
// leader, takes every entry encoded so far (f.pend, from all the Appends
// waiting), and writes them with one write and one fsync with f.mu
// released, so that Appends keep encoding meanwhile into the other buffer;
// every Append whose entry that commit covered returns after it, the others
// wait for the next one, which one of them leads:
//
//	A: encode e1 | lead: write e1+e2, fsync ....... | done
//	B:    encode e2 | wait ........................ | done
//	C:                  encode e3 | wait .......... | lead: write e3+e4, fsync | done
//	D:                      encode e4 | wait ...................................| done
//
// Nothing is delayed on purpose: a commit starts as soon as the previous
// one ended (RocksDB's and PostgreSQL's group commits work the same way).
// Under FsyncNone and FsyncInterval Append writes at once and f.pend stays
// empty: a commit is then an fsync alone.
func (f *Store) syncLocked(target int64) error {
	f.waiters++
	defer func() {
		f.waiters--
		f.cond.Broadcast() // Close may wait for the last one to leave
	}()
	for f.synced < target {
		if f.failed != nil {
			return f.failed
		}
		if f.flushing {
			f.cond.Wait()
			continue
		}
		f.flushing = true // rollLocked waits for it: file stays the active segment
		list, off, file := f.pend, f.written-f.base, f.file
		f.pend = f.spare[:0]
		upTo := f.end
		iov := f.iov[:0]
		for _, b := range list {
			iov = append(iov, *b)
		}
		f.mu.Unlock()
		var err error
		if len(iov) > 0 {
			_, err = file.WriteBuffersAt(iov, off)
		}
		if err == nil {
			err = file.Sync()
		}
		clear(iov)
		for i, b := range list {
			f.bufs.put(b)
			list[i] = nil
		}
		f.mu.Lock()
		f.flushing = false
		f.spare, f.iov = list[:0], iov[:0]
		switch {
		case err != nil && f.failed == nil:
			// A part of the entries may be in the file; after a failed
			// fsync the kernel may have dropped the dirty pages: what the
			// file holds is unknown.
			f.failed = fmt.Errorf("%w: commit at offset %d of %s: %w", broker.ErrStoreFailed, off, f.path, err)
		case err == nil:
			if len(iov) > 0 {
				f.written = upTo
				f.stats.writes.Add(1)
			}
			f.synced = max(f.synced, upTo)
			f.stats.syncs.Add(1)
		}
		f.cond.Broadcast()
	}
	return nil
}

// flushLocked writes what is encoded and not yet written, under f.mu and
// with no commit in progress (rollLocked, before it seals the segment).
func (f *Store) flushLocked() error {
	if len(f.pend) == 0 {
		return nil
	}
	iov := f.iov[:0]
	for _, b := range f.pend {
		iov = append(iov, *b)
	}
	_, err := f.file.WriteBuffersAt(iov, f.written-f.base)
	clear(iov)
	f.iov = iov[:0]
	for i, b := range f.pend {
		f.bufs.put(b)
		f.pend[i] = nil
	}
	f.pend = f.pend[:0]
	if err != nil {
		f.failed = fmt.Errorf("%w: append at offset %d of %s: %w", broker.ErrStoreFailed, f.written-f.base, f.path, err)
		return f.failed
	}
	f.written = f.end
	f.stats.writes.Add(1)
	return nil
}

// bufPool holds the buffers entries are encoded into; those larger than
// maxKeptBuf are left to the garbage collector.
type bufPool struct{ pool sync.Pool }

// get returns a buffer of capacity at least n.
func (p *bufPool) get(n int) *[]byte {
	b, _ := p.pool.Get().(*[]byte)
	if b == nil {
		b = new([]byte)
	}
	if cap(*b) < n {
		*b = make([]byte, 0, n)
	}
	return b
}

// put returns b to the pool.
func (p *bufPool) put(b *[]byte) {
	if cap(*b) > maxKeptBuf {
		return
	}
	*b = (*b)[:0]
	p.pool.Put(b)
}

// maintain is the maintenance goroutine, started by Open under
// FsyncInterval or RetainAge and stopped by Close: under FsyncInterval it
// fsyncs every interval if something was written since the last fsync;
// under RetainAge it removes the sealed segments that aged out, so that a
// store nobody writes to still ages (see retainEvery).
func (f *Store) maintain() {
	defer close(f.done)
	var syncTick, retainTick <-chan time.Time
	if f.cfg.policy == FsyncInterval {
		t := time.NewTicker(f.cfg.every)
		defer t.Stop()
		syncTick = t.C
	}
	if f.cfg.retainAge > 0 {
		t := time.NewTicker(retainEvery(f.cfg.retainAge))
		defer t.Stop()
		retainTick = t.C
	}
	for {
		select {
		case <-f.stop:
			return
		case <-syncTick:
			f.mu.Lock()
			if !f.closed && f.failed == nil && f.synced < f.end {
				_ = f.syncLocked(f.end) // a failure is sticky: the next Append returns it
			}
			f.mu.Unlock()
		case <-retainTick:
			f.mu.Lock()
			if !f.closed {
				f.retainLocked(f.cfg.now())
			}
			f.mu.Unlock()
		}
	}
}
