package file

// What Store needs of its file, so that tests can inject faults
// (a full disk, a failing fsync) between the store and the operating system.

import (
	"io"
	"os"
)

// storeFile is the part of *os.File that Store uses.
type storeFile interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
	Truncate(size int64) error
	Stat() (os.FileInfo, error)
	Close() error
}

// withFile wraps the store's file (opened and locked by Open)
// before anything reads or writes it. Tests use it, through export_test.go,
// to inject faults; it is unexported because a production store has no use
// for it.
func withFile(wrap func(storeFile) storeFile) Option {
	return fileOptionFunc(func(c *fileConfig) error { c.wrap = wrap; return nil })
}
