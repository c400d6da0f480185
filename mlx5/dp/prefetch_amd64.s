#include "textflag.h"
#include "go_asm.h"

// Prefetch instructions never fault, so any address is safe here.

// func prefetchDescs(d *rxDesc, n int, headroom uintptr, oneLine *[256]uint8, m int)
// For each of n descriptors: PREFETCHT0 on the first data line (buf +
// headroom) and on the second, unless it is the shinfo line (a frame of one
// line) or oneLine[hdrType] says the headers end in the first; PREFETCHW on
// the shinfo line, buf + (headroom + length + 63) &^ 63. Then, for the m
// descriptors after those, PREFETCHW on the shinfo line alone.
TEXT ·prefetchDescs(SB), NOSPLIT, $0-40
	MOVQ d+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ headroom+16(FP), DI
	MOVQ oneLine+24(FP), R9
	TESTQ CX, CX
	JLE shinfos
loop:
	MOVQ rxDesc_buf(SI), AX
	MOVWQZX rxDesc_length(SI), BX
	ADDQ DI, BX
	ADDQ $63, BX
	ANDQ $~63, BX
	ADDQ AX, BX
	ADDQ DI, AX
	PREFETCHT0 (AX)
	LEAQ 64(AX), DX
	CMPQ DX, BX
	JEQ shinfo
	MOVBQZX rxDesc_hdrType(SI), R8
	CMPB (R9)(R8*1), $0
	JNE shinfo
	PREFETCHT0 (DX)
shinfo:
	// PREFETCHW (BX): 0F 0D /1, ModRM 0x0B = mod 00, reg 001, rm 011 (RBX).
	// Go's assembler has no mnemonic for it.
	BYTE $0x0F; BYTE $0x0D; BYTE $0x0B
	ADDQ $rxDesc__size, SI
	DECQ CX
	JNZ loop
shinfos:
	MOVQ m+32(FP), CX
	TESTQ CX, CX
	JLE done
loop3:
	MOVQ rxDesc_buf(SI), AX
	MOVWQZX rxDesc_length(SI), BX
	ADDQ DI, BX
	ADDQ $63, BX
	ANDQ $~63, BX
	ADDQ AX, BX
	BYTE $0x0F; BYTE $0x0D; BYTE $0x0B // PREFETCHW (BX)
	ADDQ $rxDesc__size, SI
	DECQ CX
	JNZ loop3
done:
	RET

// func prefetchLines(p uintptr, n int)
// PREFETCHT0 on n consecutive 64-byte lines from p.
TEXT ·prefetchLines(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	TESTQ CX, CX
	JLE done2
loop2:
	PREFETCHT0 (AX)
	ADDQ $64, AX
	DECQ CX
	JNZ loop2
done2:
	RET

// func prefetchDescsL2(d *rxDesc, n int, headroom uintptr, oneLine *[256]uint8)
// As prefetchDescs without its m tail, into L2 (PREFETCHT1) for the header
// lines and the shinfo line alike.
TEXT ·prefetchDescsL2(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ headroom+16(FP), DI
	MOVQ oneLine+24(FP), R9
	TESTQ CX, CX
	JLE done4
loop4:
	MOVQ rxDesc_buf(SI), AX
	MOVWQZX rxDesc_length(SI), BX
	ADDQ DI, BX
	ADDQ $63, BX
	ANDQ $~63, BX
	ADDQ AX, BX
	ADDQ DI, AX
	PREFETCHT1 (AX)
	LEAQ 64(AX), DX
	CMPQ DX, BX
	JEQ shinfo4
	MOVBQZX rxDesc_hdrType(SI), R8
	CMPB (R9)(R8*1), $0
	JNE shinfo4
	PREFETCHT1 (DX)
shinfo4:
	PREFETCHT1 (BX)
	ADDQ $rxDesc__size, SI
	DECQ CX
	JNZ loop4
done4:
	RET
