package afxdp

import "fmt"

// A minimal eBPF assembler: enough for the two small programs this package
// loads, with symbolic jump targets so no offset is counted by hand.

type reg uint8

const (
	r0 reg = iota
	r1
	r2
	r3
	r4
	r5
	r6
	r7
	r8
	r9
	r10 // frame pointer, read-only
)

// Instruction classes, operations and sizes (include/uapi/linux/bpf_common.h, bpf.h).
const (
	clsLDX   = 0x01
	clsSTX   = 0x03
	clsJMP   = 0x05
	clsALU64 = 0x07
	srcK     = 0x00
	srcX     = 0x08
	modeMEM  = 0x60
	ldImm64  = 0x18 // BPF_LD | BPF_IMM | BPF_DW

	aluAdd = 0x00
	aluSub = 0x10
	aluAnd = 0x50
	aluLsh = 0x60
	aluRsh = 0x70
	aluMov = 0xb0

	jmpJA   = 0x00
	jmpJEQ  = 0x10
	jmpJGT  = 0x20
	jmpJNE  = 0x50
	jmpCall = 0x80
	jmpExit = 0x90

	sizeW  = 0x00
	sizeH  = 0x08
	sizeB  = 0x10
	sizeDW = 0x18
)

type insn struct {
	op       uint8
	dst, src reg
	off      int16
	imm      int32
	target   string // jump target label, resolved by assemble
	label    string // label of this instruction
}

type prog struct {
	ins   []insn
	label string // pending label for the next instruction
}

func (p *prog) emit(i insn) {
	i.label, p.label = p.label, ""
	p.ins = append(p.ins, i)
}

// Label names the next instruction.
func (p *prog) Label(name string) { p.label = name }

func (p *prog) MovImm(dst reg, imm int32) {
	p.emit(insn{op: clsALU64 | aluMov | srcK, dst: dst, imm: imm})
}
func (p *prog) Mov(dst, src reg) { p.emit(insn{op: clsALU64 | aluMov | srcX, dst: dst, src: src}) }
func (p *prog) AddImm(dst reg, imm int32) {
	p.emit(insn{op: clsALU64 | aluAdd | srcK, dst: dst, imm: imm})
}
func (p *prog) Sub(dst, src reg) { p.emit(insn{op: clsALU64 | aluSub | srcX, dst: dst, src: src}) }
func (p *prog) Add(dst, src reg) { p.emit(insn{op: clsALU64 | aluAdd | srcX, dst: dst, src: src}) }
func (p *prog) AndImm(dst reg, imm int32) {
	p.emit(insn{op: clsALU64 | aluAnd | srcK, dst: dst, imm: imm})
}
func (p *prog) LshImm(dst reg, imm int32) {
	p.emit(insn{op: clsALU64 | aluLsh | srcK, dst: dst, imm: imm})
}
func (p *prog) RshImm(dst reg, imm int32) {
	p.emit(insn{op: clsALU64 | aluRsh | srcK, dst: dst, imm: imm})
}

// Load dst = *(size *)(src + off).
func (p *prog) Load(size uint8, dst, src reg, off int16) {
	p.emit(insn{op: clsLDX | modeMEM | size, dst: dst, src: src, off: off})
}

// Store *(size *)(dst + off) = src.
func (p *prog) Store(size uint8, dst reg, off int16, src reg) {
	p.emit(insn{op: clsSTX | modeMEM | size, dst: dst, src: src, off: off})
}

func (p *prog) JmpImm(op uint8, dst reg, imm int32, target string) {
	p.emit(insn{op: clsJMP | op | srcK, dst: dst, imm: imm, target: target})
}

func (p *prog) Jmp(op uint8, dst, src reg, target string) {
	p.emit(insn{op: clsJMP | op | srcX, dst: dst, src: src, target: target})
}

func (p *prog) Ja(target string) { p.emit(insn{op: clsJMP | jmpJA, target: target}) }
func (p *prog) Call(fn int32)    { p.emit(insn{op: clsJMP | jmpCall, imm: fn}) }
func (p *prog) Exit()            { p.emit(insn{op: clsJMP | jmpExit}) }

// LoadMapFD is the two-slot ld_imm64 that the verifier turns into a map pointer.
func (p *prog) LoadMapFD(dst reg, fd int) {
	p.emit(insn{op: ldImm64, dst: dst, src: bpfPseudoMapFD, imm: int32(fd)})
	p.emit(insn{}) // second half of ld_imm64: upper 32 bits, zero
}

// Return exits with a constant verdict.
func (p *prog) Return(verdict int32) {
	p.MovImm(r0, verdict)
	p.Exit()
}

// assemble encodes the program, resolving labels. It returns an error for
// an unknown or duplicate label.
func (p *prog) assemble() ([]uint64, error) {
	at := map[string]int{}
	for i, in := range p.ins {
		if in.label == "" {
			continue
		}
		if _, dup := at[in.label]; dup {
			return nil, fmt.Errorf("bpf asm: duplicate label %q", in.label)
		}
		at[in.label] = i
	}
	if p.label != "" {
		return nil, fmt.Errorf("bpf asm: label %q at the end of the program", p.label)
	}
	out := make([]uint64, len(p.ins))
	for i, in := range p.ins {
		off := in.off
		if in.target != "" {
			t, ok := at[in.target]
			if !ok {
				return nil, fmt.Errorf("bpf asm: unknown label %q", in.target)
			}
			off = int16(t - i - 1)
		}
		out[i] = uint64(in.op) | uint64(in.dst&0xf)<<8 | uint64(in.src&0xf)<<12 |
			uint64(uint16(off))<<16 | uint64(uint32(in.imm))<<32
	}
	return out, nil
}
