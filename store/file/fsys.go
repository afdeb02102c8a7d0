package file

// What Store needs of the file system besides its segments' contents: the
// operations that change a directory, and a directory's fsync. Tests put a
// layer here (withFS, through export_test.go) that records every one of
// them, with the writes and fsyncs of the files (withFile), to build the
// states a crash can leave.

import (
	"io/fs"
	"os"
	"runtime"
)

// fileSystem is the part of package os that changes the store's directory.
// Reads (listing the directory, stat, opening for reading) go to os
// directly: they change nothing a crash could leave half done.
type fileSystem interface {
	// OpenFile is os.OpenFile; with os.O_CREATE it may add a name.
	OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error)
	Remove(name string) error
	Link(oldname, newname string) error
	Rename(oldpath, newpath string) error
	// SyncDir fsyncs the directory dir, so that the names added, removed
	// or replaced in it survive a crash.
	SyncDir(dir string) error
}

// osFS is the operating system's file system: the default.
type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}
func (osFS) Remove(name string) error             { return os.Remove(name) }
func (osFS) Link(oldname, newname string) error   { return os.Link(oldname, newname) }
func (osFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

// SyncDir fsyncs dir (nothing on Windows, where a directory cannot be
// opened for it and NTFS journals its entries).
func (osFS) SyncDir(dir string) error {
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

// withFS makes a Store change its directory through fsys. Tests only, as
// withFile.
func withFS(fsys fileSystem) Option {
	return fileOptionFunc(func(c *fileConfig) error { c.fs = fsys; return nil })
}
