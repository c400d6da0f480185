#include "textflag.h"

// PREFETCHT0 never faults, so any address is safe here.

// func prefetchSlot(p *uint64)
TEXT ·prefetchSlot(SB), NOSPLIT, $0-8
	MOVQ p+0(FP), AX
	PREFETCHT0 (AX)
	RET

// func touchSessions(idx []uint64, mask uint32, sess []session, hs []uint64) (maps int)
// Every index read is at a slot masked by mask, and len(idx) is mask+1;
// a probe ends at an empty slot, and the index is never full (its load
// is at most one half). A session is 32 bytes (session's doc); ids past
// len(sess) are not prefetched.
TEXT ·touchSessions(SB), NOSPLIT, $0-88
	MOVQ idx_base+0(FP), DI
	MOVL mask+24(FP), R8
	MOVQ sess_base+32(FP), AX
	MOVQ sess_len+40(FP), DX
	MOVQ hs_base+56(FP), SI
	MOVQ hs_len+64(FP), CX
	XORQ R12, R12 // map probes
	MOVQ $0x6000000000000000, R13 // probeSess|probeDone
loop:
	TESTQ CX, CX
	JZ done
	MOVQ (SI), BX
	BTQ $62, BX // probeSess
	JCC notsess
	MOVL BX, R9 // the hash
	MOVL R9, R10
	ANDL R8, R10
probe:
	MOVQ (DI)(R10*8), R11
	TESTQ R11, R11
	JZ store // empty: id+1 is 0
	MOVQ R11, BX
	SHRQ $32, BX
	CMPL BX, R9
	JEQ hit
	INCL R10
	ANDL R8, R10
	JMP probe
hit:
	MOVL R11, R11 // id+1, at least 1
	CMPQ R11, DX
	JHI store
	MOVQ R11, BX
	SHLQ $5, BX
	PREFETCHT0 -32(AX)(BX*1)
store:
	ORQ R13, R11
	MOVQ R11, (SI)
	JMP next
notsess:
	BTQ $63, BX // probeMap
	JCC next
	INCQ R12
next:
	ADDQ $8, SI
	DECQ CX
	JMP loop
done:
	MOVQ R12, maps+80(FP)
	RET
