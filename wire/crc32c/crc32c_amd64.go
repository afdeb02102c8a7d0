//go:build amd64 && !purego

package crc32c

import "golang.org/x/sys/cpu"

// canFold reports whether the CPU and the OS run fold's instructions:
// AVX-512 Foundation with its carry-less multiplication, the 128-bit
// PCLMULQDQ with AVX, and SSE4.2's CRC32 for the end.
// GODEBUG=cpu.avx512f=off, which the runtime and x/sys/cpu both know,
// turns folding off.
var canFold = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VPCLMULQDQ &&
	cpu.X86.HasPCLMULQDQ && cpu.X86.HasAVX && cpu.X86.HasSSE42

// fold folds p, whose length is a positive multiple of foldBlock, with s
// XORed into its first four bytes, into one 128-bit block (see the package
// doc), and returns the block's CRC-32C register from 0, without the
// inversions; k is constants. In crc32c_amd64.s.
//
//go:noescape
func fold(s uint32, p []byte, k *[6]uint64) uint32
