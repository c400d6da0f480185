#include "textflag.h"

// PREFETCHT0 never faults, so any address is safe here.

// func prefetchSlot(p *uint64)
TEXT ·prefetchSlot(SB), NOSPLIT, $0-8
	MOVQ p+0(FP), AX
	PREFETCHT0 (AX)
	RET

// func prefetchSession(p *session)
TEXT ·prefetchSession(SB), NOSPLIT, $0-8
	MOVQ p+0(FP), AX
	PREFETCHT0 (AX)
	RET
