//go:build unix

package file

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// lockFile takes an exclusive advisory lock (flock) on file without
// waiting; it returns ErrLocked if another open file description holds one,
// in this process or another. The lock goes when the file is closed or the
// process dies, so a crashed broker never leaves a stale lock behind.
func lockFile(file *os.File) error {
	err := unix.Flock(int(file.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return ErrLocked
	}
	return err
}
