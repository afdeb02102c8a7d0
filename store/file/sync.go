package file

// The Store's durability machinery: group-commit fsync under
// FsyncBatch, the FsyncInterval goroutine, and fsyncing a new file's directory.

import (
	"fmt"
	"github.com/inflightmq/inflight/broker"
	"os"
	"runtime"
	"time"
)

// syncDir fsyncs a directory so that a file created in it survives a
// machine crash. Windows cannot open a directory for that, and does not need
// it.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncLocked returns once the file is fsynced at least up to target, or the
// store failed. Called with f.mu held; it releases f.mu during the fsync, so
// that Appends keep writing meanwhile, and one fsync covers every entry
// written before it started (group commit):
//
//	A: write e1 | fsync ............ | done           (covers e1, e2)
//	B:   write e2 | wait for A's fsync | done
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
		if f.syncing {
			f.cond.Wait()
			continue
		}
		f.syncing = true // rollLocked waits for it: file stays the active segment
		upTo, file := f.end, f.file
		f.mu.Unlock()
		err := file.Sync()
		f.mu.Lock()
		f.syncing = false
		if err != nil && f.failed == nil {
			// After a failed fsync the kernel may have dropped the dirty
			// pages: what the file holds is unknown.
			f.failed = fmt.Errorf("%w: fsync: %w", broker.ErrStoreFailed, err)
		}
		if err == nil {
			f.synced = max(f.synced, upTo)
		}
	}
	return nil
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
