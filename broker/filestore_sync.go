package broker

// The FileStore's durability machinery: group-commit fsync under
// FsyncBatch, the FsyncInterval goroutine, and fsyncing a new file's directory.

import (
	"fmt"
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
func (f *FileStore) syncLocked(target int64) error {
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
		f.syncing = true
		upTo := f.end
		f.mu.Unlock()
		err := f.file.Sync()
		f.mu.Lock()
		f.syncing = false
		if err != nil && f.failed == nil {
			// After a failed fsync the kernel may have dropped the dirty
			// pages: what the file holds is unknown.
			f.failed = fmt.Errorf("%w: fsync: %w", ErrStoreFailed, err)
		}
		if err == nil {
			f.synced = max(f.synced, upTo)
		}
	}
	return nil
}

// syncEvery is the FsyncInterval goroutine: every d it fsyncs if something
// was written since the last fsync. Close stops it and waits for it.
func (f *FileStore) syncEvery(d time.Duration) {
	defer close(f.done)
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-tick.C:
			f.mu.Lock()
			if !f.closed && f.failed == nil && f.synced < f.end {
				_ = f.syncLocked(f.end) // a failure is sticky: the next Append returns it
			}
			f.mu.Unlock()
		}
	}
}
