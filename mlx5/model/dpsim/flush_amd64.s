#include "textflag.h"

// func flushRange(p, n uintptr)
TEXT ·flushRange(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	ADDQ AX, CX          // end
	ANDQ $~63, AX        // first line
loop:
	CMPQ AX, CX
	JAE done
	CLFLUSHOPT (AX)
	ADDQ $64, AX
	JMP loop
done:
	SFENCE
	RET

// func fence()
TEXT ·fence(SB), NOSPLIT, $0-0
	MFENCE
	RET

// func ntCopy(dst, src, n uintptr)
// Copies n bytes (a multiple of 8) with MOVNTI, stores that do not
// allocate the lines in any cache level (a line already cached is evicted
// first), then SFENCE.
TEXT ·ntCopy(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ ntdone
ntloop:
	MOVQ (SI), AX
	MOVNTIQ AX, (DI)
	ADDQ $8, SI
	ADDQ $8, DI
	DECQ CX
	JNZ ntloop
ntdone:
	SFENCE
	RET
