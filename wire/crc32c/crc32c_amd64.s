//go:build amd64 && !purego

#include "textflag.h"

// func fold(s uint32, p []byte, k *[6]uint64) uint32
//
// Z0-Z3 hold the 16 blocks of 128 bits being folded, 256 bytes of p;
// Z10 the constants for 2048 bits (k[0:2]) in each 128-bit lane, Z11
// those for 512 (k[2:4]), X9 those for 128 (k[4:6]): all below Z16, so
// that VZEROUPPER leaves no 512-bit state behind. VPCLMULQDQ $0x00
// multiplies each lane's low halves (a block's first 64 bits by its
// constant), $0x11 its high halves; VPTERNLOGD $0x96 XORs three operands.
TEXT ·fold(SB), NOSPLIT, $0-44
	MOVL s+0(FP), AX
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX
	MOVQ k+32(FP), DX

	// The first 256 bytes, s XORed into the first four.
	VMOVDQU64 0(SI), Z0
	VMOVDQU64 64(SI), Z1
	VMOVDQU64 128(SI), Z2
	VMOVDQU64 192(SI), Z3
	VMOVD     AX, X8
	VPXORD    Z8, Z0, Z0
	VBROADCASTI32X4 0(DX), Z10
	ADDQ $256, SI
	SUBQ $256, CX

	// Each block folded 2048 bits ahead, onto the block there.
loop:
	CMPQ CX, $256
	JB   end
	VPCLMULQDQ $0x00, Z10, Z0, Z4
	VPCLMULQDQ $0x11, Z10, Z0, Z0
	VPTERNLOGD $0x96, 0(SI), Z4, Z0
	VPCLMULQDQ $0x00, Z10, Z1, Z5
	VPCLMULQDQ $0x11, Z10, Z1, Z1
	VPTERNLOGD $0x96, 64(SI), Z5, Z1
	VPCLMULQDQ $0x00, Z10, Z2, Z6
	VPCLMULQDQ $0x11, Z10, Z2, Z2
	VPTERNLOGD $0x96, 128(SI), Z6, Z2
	VPCLMULQDQ $0x00, Z10, Z3, Z7
	VPCLMULQDQ $0x11, Z10, Z3, Z3
	VPTERNLOGD $0x96, 192(SI), Z7, Z3
	ADDQ $256, SI
	SUBQ $256, CX
	JMP  loop

	// Z0 into Z1, then into Z2 and Z3: 512 bits each.
end:
	VBROADCASTI32X4 16(DX), Z11
	VPCLMULQDQ $0x00, Z11, Z0, Z4
	VPCLMULQDQ $0x11, Z11, Z0, Z0
	VPTERNLOGD $0x96, Z4, Z1, Z0
	VPCLMULQDQ $0x00, Z11, Z0, Z4
	VPCLMULQDQ $0x11, Z11, Z0, Z0
	VPTERNLOGD $0x96, Z4, Z2, Z0
	VPCLMULQDQ $0x00, Z11, Z0, Z4
	VPCLMULQDQ $0x11, Z11, Z0, Z0
	VPTERNLOGD $0x96, Z4, Z3, Z0

	// Z0's four lanes into the last: 128 bits each.
	VMOVDQU       32(DX), X9
	VEXTRACTI32X4 $1, Z0, X1
	VEXTRACTI32X4 $2, Z0, X2
	VEXTRACTI32X4 $3, Z0, X3
	VPCLMULQDQ    $0x00, X9, X0, X4
	VPCLMULQDQ    $0x11, X9, X0, X0
	VPXOR         X4, X0, X0
	VPXOR         X1, X0, X0
	VPCLMULQDQ    $0x00, X9, X0, X4
	VPCLMULQDQ    $0x11, X9, X0, X0
	VPXOR         X4, X0, X0
	VPXOR         X2, X0, X0
	VPCLMULQDQ    $0x00, X9, X0, X4
	VPCLMULQDQ    $0x11, X9, X0, X0
	VPXOR         X4, X0, X0
	VPXOR         X3, X0, X0

	// The block's CRC from a register of 0: CRC32 does CRC-32C without
	// the inversions.
	VMOVQ   X0, AX
	VPEXTRQ $1, X0, BX
	VZEROUPPER
	XORL    CX, CX
	CRC32Q  AX, CX
	CRC32Q  BX, CX
	MOVL    CX, ret+40(FP)
	RET
