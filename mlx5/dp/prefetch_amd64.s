#include "textflag.h"

// func prefetchPacket(data, shinfo uintptr)
// Prefetch instructions never fault, so any address is safe here.
TEXT ·prefetchPacket(SB), NOSPLIT, $0-16
	MOVQ data+0(FP), AX
	MOVQ shinfo+8(FP), CX
	PREFETCHT0 (AX)
	LEAQ 64(AX), DX
	CMPQ DX, CX
	JEQ shinfo // a frame of one line: its second line is the shinfo line
	PREFETCHT0 (DX)
shinfo:
	// PREFETCHW (CX): 0F 0D /1, ModRM 0x09 = mod 00, reg 001, rm 001 (RCX).
	// Go's assembler has no mnemonic for it.
	BYTE $0x0F; BYTE $0x0D; BYTE $0x09
	RET

// func prefetchLine(p uintptr)
TEXT ·prefetchLine(SB), NOSPLIT, $0-8
	MOVQ p+0(FP), AX
	PREFETCHT0 (AX)
	RET
