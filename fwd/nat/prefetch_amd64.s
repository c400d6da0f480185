#include "textflag.h"
#include "go_asm.h"

// PREFETCHT0 never faults, so any address is safe here.

// func prefetchSlot(p *uint64)
TEXT ·prefetchSlot(SB), NOSPLIT, $0-8
	MOVQ p+0(FP), AX
	PREFETCHT0 (AX)
	RET

// func touchSessions(idx []uint64, mask uint32, sess []session, hs []uint64) (maps int)
// Every index read is at a slot masked by mask, and len(idx) is mask+1;
// a probe ends at an empty slot, and the index is never full (its load
// is at most one half). A session is 32 bytes (session's doc). An id
// past len(sess) is prefetched too: PREFETCHT0 never faults, and the
// translation checks the id against the table.
TEXT ·touchSessions(SB), NOSPLIT, $0-88
	MOVQ idx_base+0(FP), DI
	MOVL mask+24(FP), R8
	MOVQ sess_base+32(FP), AX
	MOVQ hs_base+56(FP), SI
	MOVQ hs_len+64(FP), CX
	XORQ R12, R12 // map probes
	TESTQ CX, CX
	JZ done
loop:
	MOVQ (SI), BX
	BTQ $62, BX // probeSess
	JCC notsess
	MOVL BX, R10 // BX's low half is the hash
	ANDL R8, R10
probe:
	MOVQ (DI)(R10*8), R11
	TESTQ R11, R11
	JZ store // empty: id+1 is 0
	CMPL 4(DI)(R10*8), BX // the slot's tag, its high half
	JNE nextslot
	MOVL R11, R9 // id+1, at least 1
	SHLQ $5, R9
	PREFETCHT0 -32(AX)(R9*1)
store:
	MOVL R11, (SI) // the low half: id+1
	MOVL $((const_probeSess|const_probeDone)>>32), 4(SI) // the high half
next:
	ADDQ $8, SI
	DECQ CX
	JNZ loop
done:
	MOVQ R12, maps+80(FP)
	RET
nextslot:
	INCL R10
	ANDL R8, R10
	JMP probe
notsess:
	BTQ $63, BX // probeMap
	JCC next
	INCQ R12
	JMP next

// hashWire's multiplier, a memory operand for IMULQ (an immediate has
// 32 bits).
DATA hashMul<>+0(SB)/8, $0x9e3779b97f4a7c15
GLOBL hashMul<>(SB), RODATA|NOPTR, $8

// func PrefetchIPv4(t *Table, h *[PrefetchLen]byte) uint64
// hashWire over h's addresses (bytes 12-19), ports (20-23) and protocol
// (byte 9); the slot is masked by sidx.mask, and len(sidx.s) is mask+1
// or 0 (nil: the prefetch's address is then meaningless, and harmless).
TEXT ·PrefetchIPv4(SB), NOSPLIT, $0-24
	MOVQ t+0(FP), DI
	MOVQ h+8(FP), SI
	MOVQ 12(SI), AX // addrs, wire order
	MOVL AX, BX
	ANDL (Table_src0+pfx4_mask)(DI), BX
	CMPL BX, (Table_src0+pfx4_addr)(DI)
	JNE miss
	MOVBLZX 9(SI), CX // protocol
	CMPL CX, $6 // TCP
	JEQ hash
	CMPL CX, $17 // UDP
	JNE miss
hash:
	BSWAPQ AX
	MOVL 20(SI), DX // the ports
	BSWAPL DX
	SHLQ $32, DX
	ORQ CX, DX
	XORQ DX, AX
	XORQ Table_seed(DI), AX
	MOVQ AX, DX
	SHRQ $29, DX
	XORQ DX, AX
	IMULQ hashMul<>(SB), AX
	SHRQ $32, AX // the hash
	MOVL (Table_sidx+index_mask)(DI), DX
	ANDL AX, DX
	MOVQ (Table_sidx+index_s)(DI), BX
	PREFETCHT0 (BX)(DX*8)
	BTSQ $62, AX // probeSess
	MOVQ AX, ret+16(FP)
	RET
miss: // the arguments are where prefetchRest's take them
	JMP ·prefetchRest(SB)
