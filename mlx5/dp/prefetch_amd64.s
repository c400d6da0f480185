#include "textflag.h"
#include "go_asm.h"

// HEAD(off, skip): PREFETCHT0 on the header line of the descriptor at
// off(SI), and on the next line unless oneLine (R9) says the headers end
// in the first. DI holds the headroom; clobbers AX, R8.
#define HEAD(off, skip) \
	MOVQ (off+rxDesc_buf)(SI), AX \
	PREFETCHT0 (AX)(DI*1) \
	MOVBQZX (off+rxDesc_hdrType)(SI), R8 \
	CMPB (R9)(R8*1), $0 \
	JNE skip \
	PREFETCHT0 64(AX)(DI*1) \
skip:

// SHINFOW(off): PREFETCHW on the shinfo line of the descriptor at off(SI).
// PREFETCHW (AX)(BX*1) is 0F 0D /1 with ModRM 0x0C (mod 00, reg 001,
// rm 100 = SIB) and SIB 0x18 (scale 1, index RBX, base RAX). Clobbers AX, BX.
#define SHINFOW(off) \
	MOVQ (off+rxDesc_buf)(SI), AX \
	MOVWQZX (off+rxDesc_length)(SI), BX \
	LEAQ 63(DI)(BX*1), BX \
	ANDQ $~63, BX \
	BYTE $0x0F; BYTE $0x0D; BYTE $0x0C; BYTE $0x18

// L2(off, skip): PREFETCHT1 on the header line(s) and the shinfo line of the
// descriptor at off(SI). Clobbers AX, BX, R8.
#define L2(off, skip) \
	MOVQ (off+rxDesc_buf)(SI), AX \
	MOVWQZX (off+rxDesc_length)(SI), BX \
	PREFETCHT1 (AX)(DI*1) \
	LEAQ 63(DI)(BX*1), BX \
	ANDQ $~63, BX \
	PREFETCHT1 (AX)(BX*1) \
	MOVBQZX (off+rxDesc_hdrType)(SI), R8 \
	CMPB (R9)(R8*1), $0 \
	JNE skip \
	PREFETCHT1 64(AX)(DI*1) \
skip:

// Prefetch instructions never fault, so any address is safe here. Strides
// are 64-byte aligned, so a frame's shinfo line is
// (buf + headroom + length + 63) &^ 63 = buf + ((headroom + length + 63) &^ 63).
// Go's assembler has no PREFETCHW mnemonic: it is spelled as bytes,
// 0F 0D /1 (ModRM reg field 001).

// func prefetchDescs(d *rxDesc, n int, headroom uintptr, oneLine *[256]uint8, s, m int)
// PREFETCHT0 on the first data line (buf + headroom) of the n descriptors
// from d, and on the second unless oneLine[hdrType] says the headers end in
// the first; then PREFETCHW on the shinfo lines of the m descriptors from
// d[s].
TEXT ·prefetchDescs(SB), NOSPLIT, $0-48
	MOVQ d+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ headroom+16(FP), DI
	MOVQ oneLine+24(FP), R9
	TESTQ $1, CX
	JZ heads2
	HEAD(0, h0)
	ADDQ $rxDesc__size, SI
heads2:
	SHRQ $1, CX
	JZ shinfos
loop:
	HEAD(0, h1)
	HEAD(rxDesc__size, h2)
	ADDQ $(2*rxDesc__size), SI
	DECQ CX
	JNZ loop
shinfos:
	MOVQ s+32(FP), SI
	IMULQ $rxDesc__size, SI
	ADDQ d+0(FP), SI
	MOVQ m+40(FP), CX
	TESTQ $1, CX
	JZ shinfos2
	SHINFOW(0)
	ADDQ $rxDesc__size, SI
shinfos2:
	SHRQ $1, CX
	JZ done
loop3:
	SHINFOW(0)
	SHINFOW(rxDesc__size)
	ADDQ $(2*rxDesc__size), SI
	DECQ CX
	JNZ loop3
done:
	RET

// func prefetchLines(p uintptr, n int)
// PREFETCHT0 on n consecutive 64-byte lines from p, four per iteration.
TEXT ·prefetchLines(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	SUBQ $4, CX
	JLT tail
loop4:
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	PREFETCHT0 128(AX)
	PREFETCHT0 192(AX)
	ADDQ $256, AX
	SUBQ $4, CX
	JGE loop4
tail:
	ADDQ $4, CX
	JLE done2
loop2:
	PREFETCHT0 (AX)
	ADDQ $64, AX
	DECQ CX
	JNZ loop2
done2:
	RET

// func prefetchDescsL2(d *rxDesc, n int, headroom uintptr, oneLine *[256]uint8)
// PREFETCHT1 on the lines prefetchDescs would prefetch for the n
// descriptors from d: the header lines and the shinfo line. A frame of one
// line with a header type oneLine does not know gets its shinfo line
// prefetched twice (a second request for a line in flight costs nothing).
TEXT ·prefetchDescsL2(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ headroom+16(FP), DI
	MOVQ oneLine+24(FP), R9
	TESTQ $1, CX
	JZ l2pairs
	L2(0, l0)
	ADDQ $rxDesc__size, SI
l2pairs:
	SHRQ $1, CX
	JZ done4
loop5:
	L2(0, l1)
	L2(rxDesc__size, l2)
	ADDQ $(2*rxDesc__size), SI
	DECQ CX
	JNZ loop5
done4:
	RET

// func cycles() uint64
// The time-stamp counter: RDTSC, EDX:EAX. Not serializing, and need not
// be: it brackets a whole burst of RX (thousands of cycles), so a few
// instructions moving across it do not change the comparison it feeds.
TEXT ·cycles(SB), NOSPLIT, $0-8
	RDTSC
	SHLQ $32, DX
	ORQ DX, AX
	MOVQ AX, ret+0(FP)
	RET
