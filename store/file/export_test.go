package file

import (
	"io/fs"
	"os"
	"sync"
	"time"
)

// FileFaults injects faults between a Store and its file: while set (see
// Set), WriteAt writes half of what it is given and returns the write
// error (as a full disk does), and Sync returns the sync error.
type FileFaults struct {
	mu       sync.Mutex
	writeErr error
	syncErr  error
}

// Set replaces the faults (nil: none).
func (ff *FileFaults) Set(writeErr, syncErr error) {
	ff.mu.Lock()
	defer ff.mu.Unlock()
	ff.writeErr, ff.syncErr = writeErr, syncErr
}

// WithFaults opens a Store whose file goes through ff.
func WithFaults(ff *FileFaults) Option {
	return withFile(func(f storeFile) storeFile { return &faultyFile{storeFile: f, ff: ff} })
}

type faultyFile struct {
	storeFile
	ff *FileFaults
}

func (f *faultyFile) WriteAt(p []byte, off int64) (int, error) {
	f.ff.mu.Lock()
	err := f.ff.writeErr
	f.ff.mu.Unlock()
	if err != nil {
		n, _ := f.storeFile.WriteAt(p[:len(p)/2], off)
		return n, err
	}
	return f.storeFile.WriteAt(p, off)
}

// WriteBuffersAt writes the buffers as one: half of them, then the error,
// while a write error is set.
func (f *faultyFile) WriteBuffersAt(bufs [][]byte, off int64) (int, error) {
	f.ff.mu.Lock()
	err := f.ff.writeErr
	f.ff.mu.Unlock()
	if err != nil {
		var all []byte
		for _, b := range bufs {
			all = append(all, b...)
		}
		n, _ := f.storeFile.WriteAt(all[:len(all)/2], off)
		return n, err
	}
	return f.storeFile.WriteBuffersAt(bufs, off)
}

func (f *faultyFile) Sync() error {
	f.ff.mu.Lock()
	err := f.ff.syncErr
	f.ff.mu.Unlock()
	if err != nil {
		return err
	}
	return f.storeFile.Sync()
}

// WithNow sets the clock of a Store's rolls and retention.
func WithNow(now func() time.Time) Option {
	return fileOptionFunc(func(c *fileConfig) error { c.now = now; return nil })
}

// FileCounts counts the writes and fsyncs that reach a Store's file, and
// makes each fsync take at least SyncDelay (a slower disk).
type FileCounts struct {
	SyncDelay time.Duration

	mu            sync.Mutex
	writes, syncs int
}

// Counts returns the writes and fsyncs so far.
func (c *FileCounts) Counts() (writes, syncs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes, c.syncs
}

// WithCounts opens a Store whose file goes through c.
func WithCounts(c *FileCounts) Option {
	return withFile(func(f storeFile) storeFile { return &countingFile{storeFile: f, c: c} })
}

type countingFile struct {
	storeFile
	c *FileCounts
}

func (f *countingFile) WriteAt(p []byte, off int64) (int, error) {
	f.c.mu.Lock()
	f.c.writes++
	f.c.mu.Unlock()
	return f.storeFile.WriteAt(p, off)
}

func (f *countingFile) WriteBuffersAt(bufs [][]byte, off int64) (int, error) {
	f.c.mu.Lock()
	f.c.writes++
	f.c.mu.Unlock()
	return f.storeFile.WriteBuffersAt(bufs, off)
}

func (f *countingFile) Sync() error {
	time.Sleep(f.c.SyncDelay)
	f.c.mu.Lock()
	f.c.syncs++
	f.c.mu.Unlock()
	return f.storeFile.Sync()
}

// DirSyncs counts the directory fsyncs of a Store.
type DirSyncs struct {
	mu sync.Mutex
	n  int
}

// Count returns the directory fsyncs so far.
func (d *DirSyncs) Count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n
}

// WithDirSyncs opens a Store whose directory fsyncs d counts.
func WithDirSyncs(d *DirSyncs) Option { return withFS(countingFS{d}) }

type countingFS struct{ d *DirSyncs }

func (c countingFS) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	return osFS{}.OpenFile(name, flag, perm)
}
func (c countingFS) Remove(name string) error             { return osFS{}.Remove(name) }
func (c countingFS) Link(oldname, newname string) error   { return osFS{}.Link(oldname, newname) }
func (c countingFS) Rename(oldpath, newpath string) error { return osFS{}.Rename(oldpath, newpath) }
func (c countingFS) SyncDir(dir string) error {
	c.d.mu.Lock()
	c.d.n++
	c.d.mu.Unlock()
	return osFS{}.SyncDir(dir)
}
