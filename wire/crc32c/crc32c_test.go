package crc32c

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// random returns n bytes from a fixed seed.
func random(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(rng.Uint32())
	}
	return p
}

// TestUpdateMatchesHashCRC32: Update and Checksum give hash/crc32's
// Castagnoli CRC for every length up to 5000 at every start offset mod 8,
// with random CRCs to update, for lengths around the folding's block and
// threshold, and for a few MiB; on a CPU that folds, both sides of
// foldMin.
func TestUpdateMatchesHashCRC32(t *testing.T) {
	skipUnlessFolding(t)
	buf := random(5000+8, 1)
	rng := rand.New(rand.NewPCG(2, 2))
	for off := range 8 {
		for n := 0; n+off <= len(buf); n++ {
			p := buf[off : off+n]
			crc := rng.Uint32()
			if got, want := Update(crc, p), crc32.Update(crc, table, p); got != want {
				t.Fatalf("offset %d, %d bytes, from %08x: %08x, hash/crc32 %08x", off, n, crc, got, want)
			}
		}
	}
	big := random(3<<20+77, 3)
	for _, n := range []int{foldMin - 1, foldMin, foldMin + 1, 4*foldBlock - 1, 64 << 10, 1 << 20, 1<<20 + 255, len(big)} {
		if got, want := Checksum(big[:n]), crc32.Checksum(big[:n], table); got != want {
			t.Fatalf("%d bytes: %08x, hash/crc32 %08x", n, got, want)
		}
	}
}

// skipUnlessFolding skips a test that compares Update with hash/crc32
// where Update is hash/crc32: TestFoldModel still checks the folding.
func skipUnlessFolding(t *testing.T) {
	t.Helper()
	if !canFold {
		t.Skip("no folding on this CPU or build (purego): Update is hash/crc32")
	}
}

// TestFoldModel checks the folding itself, on any CPU: a model in Go of
// what crc32c_amd64.s does (16 blocks folded 2048 bits ahead, then by 512
// and 128 bits, with the same constants) leaves a block whose CRC is
// hash/crc32's CRC of the input. On a CPU that folds, fold's register
// must be the model's.
func TestFoldModel(t *testing.T) {
	buf := random(8192, 4)
	rng := rand.New(rand.NewPCG(5, 5))
	for n := foldBlock; n <= len(buf); n += foldBlock {
		p, s := buf[:n], rng.Uint32()
		rest := modelFold(s, p)
		reg := ^crc32.Update(^uint32(0), table, rest[:]) // from a register of 0
		if got, want := ^reg, crc32.Update(^s, table, p); got != want {
			t.Fatalf("%d bytes: the model's CRC %08x, hash/crc32 %08x", n, got, want)
		}
		if canFold {
			if got := fold(s, p, &constants); got != reg {
				t.Fatalf("%d bytes: fold gave %08x, the model %08x", n, got, reg)
			}
		}
	}
}

// block is 128 bits of a message as memory holds them: lo the first 8
// bytes, little-endian.
type block struct{ lo, hi uint64 }

// modelFold is fold in Go.
func modelFold(s uint32, p []byte) [16]byte {
	var b [16]block
	for i := range b {
		b[i] = block{binary.LittleEndian.Uint64(p[16*i:]), binary.LittleEndian.Uint64(p[16*i+8:])}
	}
	b[0].lo ^= uint64(s)
	for p = p[foldBlock:]; len(p) > 0; p = p[foldBlock:] {
		for i := range b {
			next := block{binary.LittleEndian.Uint64(p[16*i:]), binary.LittleEndian.Uint64(p[16*i+8:])}
			b[i] = xor(foldBlockBy(b[i], constants[0], constants[1]), next)
		}
	}
	for r := 1; r < 4; r++ { // register r-1 into register r: block i into block i+4
		for i := range 4 {
			b[4*r+i] = xor(foldBlockBy(b[4*(r-1)+i], constants[2], constants[3]), b[4*r+i])
		}
	}
	x := b[12]
	for _, next := range b[13:] {
		x = xor(foldBlockBy(x, constants[4], constants[5]), next)
	}
	var out [16]byte
	binary.LittleEndian.PutUint64(out[:], x.lo)
	binary.LittleEndian.PutUint64(out[8:], x.hi)
	return out
}

// foldBlockBy is one fold: x's halves times their constants, XORed.
func foldBlockBy(x block, kLo, kHi uint64) block {
	lo1, hi1 := clmul(x.lo, kLo)
	lo2, hi2 := clmul(x.hi, kHi)
	return block{lo1 ^ lo2, hi1 ^ hi2}
}

func xor(a, b block) block { return block{a.lo ^ b.lo, a.hi ^ b.hi} }

// clmul is the carry-less product of a and b, 128 bits.
func clmul(a, b uint64) (lo, hi uint64) {
	for i := range 64 {
		if b>>i&1 != 0 {
			lo ^= a << i
			if i > 0 {
				hi ^= a >> (64 - i)
			}
		}
	}
	return lo, hi
}

// TestXPowMod: x^32 mod P is P's low terms, and powers compose.
func TestXPowMod(t *testing.T) {
	if got := xPowMod(32); got != polynomial {
		t.Fatalf("x^32 mod P = %08x, want %08x", got, polynomial)
	}
	for _, e := range []int{0, 1, 31, 33, 100} {
		a, b := clmul(uint64(xPowMod(e)), uint64(xPowMod(64)))
		if b != 0 {
			t.Fatal("a 63-bit product has no high half")
		}
		if got, want := reduce(a), xPowMod(e+64); got != want {
			t.Fatalf("x^%d * x^64 mod P = %08x, want %08x", e, got, want)
		}
	}
}

// reduce returns v mod P for a polynomial v of degree below 64.
func reduce(v uint64) uint32 {
	for k := 63; k >= 32; k-- {
		if v>>k&1 != 0 {
			v ^= (1<<32 | polynomial) << (k - 32)
		}
	}
	return uint32(v)
}

// TestChecksumAllocatesNothing: nothing Update passes to fold escapes.
func TestChecksumAllocatesNothing(t *testing.T) {
	p := random(1<<20, 6)
	if n := testing.AllocsPerRun(10, func() { Checksum(p) }); n != 0 {
		t.Fatalf("%v allocations per Checksum", n)
	}
}

// FuzzUpdate: any input, any CRC to update, at any offset: hash/crc32's
// result.
func FuzzUpdate(f *testing.F) {
	f.Add(uint32(0), []byte("123456789"), uint8(0))
	f.Add(^uint32(0), random(4096+17, 7), uint8(3))
	f.Fuzz(func(t *testing.T, crc uint32, p []byte, off uint8) {
		skipUnlessFolding(t)
		p = p[min(int(off%16), len(p)):]
		if got, want := Update(crc, p), crc32.Update(crc, table, p); got != want {
			t.Fatalf("%d bytes from %08x: %08x, hash/crc32 %08x", len(p), crc, got, want)
		}
	})
}

// BenchmarkUpdate: Checksum against hash/crc32 by input size (bytes/s).
func BenchmarkUpdate(b *testing.B) {
	for _, n := range []int{512, 1024, 16 << 10, 128 << 10, 1 << 20} {
		p := random(n, 8)
		b.Run(fmt.Sprintf("crc32c/%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				Checksum(p)
			}
		})
		b.Run(fmt.Sprintf("hash-crc32/%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				crc32.Checksum(p, table)
			}
		})
	}
}
