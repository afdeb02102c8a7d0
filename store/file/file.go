package file

// What Store needs of its file, so that tests can inject faults
// (a full disk, a failing fsync) between the store and the operating system.

import (
	"io"
	"os"
)

// storeFile is the part of *os.File that Store uses, and a write of
// several buffers with one system call (a commit's entries).
type storeFile interface {
	io.ReaderAt
	io.WriterAt
	// WriteBuffersAt writes bufs, one after the other, at off; it returns
	// the bytes written, and an error if that is not all of them.
	WriteBuffersAt(bufs [][]byte, off int64) (int, error)
	Sync() error
	Truncate(size int64) error
	Stat() (os.FileInfo, error)
	Close() error
}

// osFile is a store's *os.File.
type osFile struct{ *os.File }

// writeEach is WriteBuffersAt with one WriteAt per buffer.
func writeEach(w io.WriterAt, bufs [][]byte, off int64) (int, error) {
	total := 0
	for _, b := range bufs {
		n, err := w.WriteAt(b, off+int64(total))
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// withFile wraps the store's file (opened and locked by Open)
// before anything reads or writes it. Tests use it, through export_test.go,
// to inject faults; it is unexported because a production store has no use
// for it.
func withFile(wrap func(storeFile) storeFile) Option {
	return fileOptionFunc(func(c *fileConfig) error { c.wrap = wrap; return nil })
}
