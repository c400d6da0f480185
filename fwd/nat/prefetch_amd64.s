#include "textflag.h"

// PREFETCHT0 never faults, so any address is safe here.

// func prefetchSlot(p *uint64)
TEXT ·prefetchSlot(SB), NOSPLIT, $0-8
	MOVQ p+0(FP), AX
	PREFETCHT0 (AX)
	RET

// func prefetchSessions(base *session, hs []uint64, n int)
// A session is 32 bytes (session's doc); ids past n are skipped.
TEXT ·prefetchSessions(SB), NOSPLIT, $0-40
	MOVQ base+0(FP), AX
	MOVQ hs_base+8(FP), SI
	MOVQ hs_len+16(FP), CX
	MOVQ n+32(FP), DX
	MOVQ $(1<<62), R9 // probeSess
loop:
	TESTQ CX, CX
	JZ done
	MOVQ (SI), BX
	ADDQ $8, SI
	DECQ CX
	TESTQ R9, BX
	JZ loop
	MOVL BX, BX // id+1
	TESTQ BX, BX
	JZ loop
	CMPQ BX, DX
	JA loop
	SHLQ $5, BX
	PREFETCHT0 -32(AX)(BX*1)
	JMP loop
done:
	RET
