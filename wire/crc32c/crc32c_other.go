//go:build !amd64 || purego

package crc32c

// canFold is false: fold exists only for amd64 (crc32c_amd64.s).
const canFold = false

// fold is never called here (canFold); it panics if it were.
func fold(uint32, []byte, *[6]uint64) uint32 { panic("crc32c: no fold on this platform") }
