// Package crc32c computes CRC-32C (the Castagnoli polynomial), the
// checksum of inflight's BATCH frames and of store/file's entries. It
// gives what hash/crc32 gives with the Castagnoli table; on amd64 CPUs
// with AVX-512 carry-less multiplication (VPCLMULQDQ) it folds inputs of
// foldMin bytes or more, several times as fast as hash/crc32's SSE4.2
// code (BenchmarkUpdate; docs/performance.md has the figures). Anywhere
// else, and with the purego build tag, it is hash/crc32.
//
// # Folding
//
// A CRC is the remainder of the message, read as a polynomial over GF(2)
// with its first bit as the highest power, times x^32, divided by P. Two
// blocks A and B of a message, B starting d bits after A, contribute
// A·x^d + B to it, up to the same power of x, and any polynomial
// congruent to A·x^d mod P may take its place with no change to the
// remainder. Folding is that step done with carry-less multiplications,
// 128 bits at a time: A's two 64-bit halves times x^(d+64) mod P and
// x^d mod P (32 bits each) give two products of at most 96 bits, aligned
// with B, and B is XORed in. The AVX-512 loop keeps 16 such 128-bit blocks in
// four 512-bit registers and folds each 256 bytes ahead; the end folds
// the 16 blocks into one by 512 bits, then 128, and the block that is
// left is the message so far: its CRC from a register of 0, with the
// register the input's CRC stands for (^crc) XORed into its first four
// bytes, is the CRC so far, which hash/crc32 takes on from there over the
// bytes the folding did not reach.
//
// The bits are reflected (the CRC's first bit is bit 0 of the first
// byte), so a 64-bit half read from memory has its highest power of x in
// bit 0, and the carry-less product of two such values lands one bit
// short of the 128-bit block it stands for: the constants are x^(d+63)
// and x^(d-1) instead of x^(d+64) and x^d (see foldConstant).
package crc32c

import (
	"hash/crc32"
	"math/bits"
)

// table is hash/crc32's Castagnoli table, built once.
var table = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C of p, as crc32.Checksum(p,
// crc32.MakeTable(crc32.Castagnoli)) does. It is safe for concurrent use
// and does not allocate.
func Checksum(p []byte) uint32 { return Update(0, p) }

// Update returns crc, a CRC-32C of some data, updated with p: the CRC of
// that data followed by p, as crc32.Update(crc, Castagnoli table, p)
// does. It is safe for concurrent use and does not allocate.
func Update(crc uint32, p []byte) uint32 {
	if len(p) < foldMin || !canFold {
		return crc32.Update(crc, table, p)
	}
	n := len(p) &^ (foldBlock - 1)
	reg := fold(^crc, p[:n], &constants)
	return crc32.Update(^reg, table, p[n:]) // Update takes ^crc: the register
}

const (
	// foldBlock is what the folding loop takes at a time: 16 blocks of 128
	// bits in four 512-bit registers.
	foldBlock = 256
	// foldMin is the shortest input folded. Folding wins from one block
	// of the loop in a tight loop (BenchmarkUpdate), but its end is a
	// chain of dependent multiplications and the first 512-bit
	// instructions after a pause may run slowly: as hash/crc32 does for
	// its own AVX-512 code, it waits for 1 KiB, where it still takes less
	// than half of hash/crc32's time.
	foldMin = 1024
	// polynomial is CRC-32C's P without its x^32 term, highest power first.
	polynomial = 0x1EDC6F41
)

// constants are the folding constants, each pair for one distance d in
// bits: 2048 (the loop: 256 bytes), 512 (one register into the next) and
// 128 (one block into the next), the constant for a block's first half
// (the low 64 bits in memory order) before that for its second.
var constants = [6]uint64{
	foldConstant(2048 + 64), foldConstant(2048),
	foldConstant(512 + 64), foldConstant(512),
	foldConstant(128 + 64), foldConstant(128),
}

// foldConstant returns x^(e-1) mod P as a carry-less multiplier of a
// reflected 64-bit half: bit-reversed, in the high 32 bits (the power
// x^k in bit 63-k). The one fewer power makes up for the product of two
// reflected values landing one bit short (see the package doc).
func foldConstant(e int) uint64 {
	return uint64(bits.Reverse32(xPowMod(e-1))) << 32
}

// xPowMod returns x^e mod P, bit k the power x^k.
func xPowMod(e int) uint32 {
	v := uint64(1)
	for range e {
		v <<= 1
		if v&(1<<32) != 0 {
			v ^= 1<<32 | polynomial
		}
	}
	return uint32(v)
}
