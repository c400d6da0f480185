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
