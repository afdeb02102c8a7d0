//go:build !linux

package file

// WriteBuffersAt writes bufs at off, one WriteAt each.
func (f osFile) WriteBuffersAt(bufs [][]byte, off int64) (int, error) {
	return writeEach(f.File, bufs, off)
}
