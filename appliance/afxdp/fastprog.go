package afxdp

import (
	"strconv"

	"github.com/cilium/ebpf/asm"
)

// Stack slots of the routed fast path besides the lookup keys at
// [-24, 0): the pseudo-header sum of a segment whose checksum is to be
// finished (0: none; a folded sum of a positive value never is), and r5
// kept across the finishing, which needs every scratch register.
const (
	fpPartialSum = -32
	fpSavedR5    = -40
)

// maxFinishLen bounds the TCP/UDP segments whose unfinished checksum the
// fast path finishes itself; longer ones go to the engine (punt_csum_partial).
// It covers every MTU up to 3,092 bytes: more than a veth or a driver that
// receives a frame into one page takes with an XDP program attached (veth
// refuses an MTU above a page less its headroom and skb_shared_info,
// veth_xdp_set), while leaving room below BPF_PROG_TEST_RUN's one-page
// limit to test the segments beyond it. The verifier walks its 32-byte
// loop once per step: 96 steps.
const maxFinishLen = 3072

// partialCsum emits the engine's cheap CHECKSUM_PARTIAL test (fwd's
// finishPartialCsum): the checksum field (field bytes into the L4 header)
// equals the folded pseudo-header sum over the addresses, proto and the L4
// length in r2 (host order, kept). Such a segment is noted for finishCsum
// (its pseudo-header sum at fpPartialSum), or, longer than maxFinishLen,
// goes to "fp_partial"; either way it goes on at label next. The sums run
// on little-endian loads: a one's-complement sum of byte-swapped words is
// the byte-swapped sum (RFC 1071 §2(B)), so the constants are swapped
// instead. IPv4 sums the addresses at [12, 20) of its 20-byte header; IPv6
// both 16-byte addresses at [8, 40) (RFC 8200 §8.1) with L4 at 40.
func partialCsum(proto int32, field int16, next string) asm.Instructions {
	return pseudoSumEquals(proto, 12, 20, 20+field, next)
}

func partialCsum6(proto int32, field int16, next string) asm.Instructions {
	return pseudoSumEquals(proto, 8, ipv6HeaderLen, ipv6HeaderLen+field, next)
}

// pseudoSumEquals notes a partial checksum (see partialCsum) when the
// 16-bit word at r7+check equals the folded sum of r2, proto and the words
// at r7+[from, to), and goes on at next.
func pseudoSumEquals(proto int32, from, to, check int16, next string) asm.Instructions {
	const r0, r2, r3, r7, r10 = asm.R0, asm.R2, asm.R3, asm.R7, asm.R10
	p := asm.Instructions{
		asm.Mov.Reg(r0, r2),
		asm.HostTo(asm.BE, r0, asm.Half),
		asm.Add.Imm(r0, proto<<8),
	}
	for off := from; off < to; off += 2 {
		p = append(p, asm.LoadMem(r3, r7, off, asm.Half), asm.Add.Reg(r0, r3))
	}
	p = append(p, foldCarry(r0, r3)...)
	return append(p,
		asm.LoadMem(r3, r7, check, asm.Half),
		asm.JNE.Reg(r3, r0, next),
		asm.JGT.Imm(r2, maxFinishLen, "fp_partial"),
		asm.StoreMem(r10, fpPartialSum, r0, asm.Word),
		asm.Ja.Label(next),
	)
}

// finishCsum emits what the engine's finishPartialCsum does to a segment
// partialCsum noted, once the frame is sure to be forwarded and before it
// is changed (so that the bounds checks may still punt it): r0 sums the
// segment, the field as stored included, onto the pseudo-header sum; a sum
// that verifies is left alone (a finished checksum that happens to equal
// the pseudo-header sum), otherwise the field takes the checksum, a UDP 0
// sent as 0xffff (RFC 768). The segment is UDP's length, or all that
// follows the IP header for TCP; l4 is where it starts, proto where the
// IP header names the protocol. r0-r4 are clobbered, r5 is kept.
//
// The loop adds 32-byte steps; the rest (< 32 bytes) is added by halving
// steps from a pointer made anew from the length, so that every way out
// of the loop reaches the rest with the same state and the verifier walks
// it once. 32-bit loads into a 64-bit sum: a 32-bit word is its two
// 16-bit halves modulo 0xffff (RFC 1071 §2(C)), and an odd last byte is
// the low byte of a little-endian word.
func finishCsum(l4, proto int16, sfx string) asm.Instructions {
	const (
		r0, r1, r2, r3, r4, r5, r7, r9, r10 = asm.R0, asm.R1, asm.R2, asm.R3, asm.R4, asm.R5, asm.R7, asm.R9, asm.R10
		W, H, B, DW                         = asm.Word, asm.Half, asm.Byte, asm.DWord
	)
	lbl := func(s string) string { return "fin" + sfx + "_" + s }
	p := asm.Instructions{
		asm.StoreMem(r10, fpSavedR5, r5, DW),
		asm.LoadMem(r0, r10, fpPartialSum, W),
		asm.JEq.Imm(r0, 0, lbl("done")),
		asm.LoadMem(r2, r7, proto, B),
		asm.JEq.Imm(r2, 17, lbl("udp")),
	}
	// r2 = the segment's length, bounded again for the verifier (the
	// byte swap loses bounds on Linux 6.1, see fastPath6).
	if l4 == 20 {
		p = append(p, asm.LoadMem(r2, r7, 2, H), asm.HostTo(asm.BE, r2, asm.Half), asm.And.Imm(r2, 0xffff), asm.Add.Imm(r2, -20))
	} else {
		p = append(p, asm.LoadMem(r2, r7, 4, H), asm.HostTo(asm.BE, r2, asm.Half), asm.And.Imm(r2, 0xffff))
	}
	p = append(p,
		asm.Ja.Label(lbl("len")),
		asm.LoadMem(r2, r7, l4+4, H).WithSymbol(lbl("udp")),
		asm.HostTo(asm.BE, r2, asm.Half),
		asm.And.Imm(r2, 0xffff),
		asm.JGT.Imm(r2, maxFinishLen, "fp_partial").WithSymbol(lbl("len")),
		asm.Mov.Reg(r1, r7),
		asm.Add.Imm(r1, int32(l4)),
		asm.Mov.Reg(r4, r2),
		asm.RSh.Imm(r4, 5),
		// The way out is the fall-through, which the verifier walks first.
		// JGE, not JNE: Linux 6.1's verifier learns r4 ≥ 1 from it (and
		// the loop's bound from that), but nothing from r4 ≠ 0.
		asm.JGE.Imm(r4, 1, lbl("step")).WithSymbol(lbl("loop")),
		asm.Ja.Label(lbl("rest")),
		asm.Mov.Reg(r3, r1).WithSymbol(lbl("step")),
		asm.Add.Imm(r3, 32),
		asm.JGT.Reg(r3, r9, "fp_length"),
	)
	for off := int16(0); off < 32; off += 4 {
		p = append(p, asm.LoadMem(r3, r1, off, W), asm.Add.Reg(r0, r3))
	}
	p = append(p,
		asm.Add.Imm(r1, 32),
		asm.Add.Imm(r4, -1),
		asm.Ja.Label(lbl("loop")),
		asm.Mov.Reg(r3, r2).WithSymbol(lbl("rest")),
		asm.And.Imm(r3, -32),
		asm.Mov.Reg(r1, r7),
		asm.Add.Reg(r1, r3),
		asm.Add.Imm(r1, int32(l4)),
	)
	for _, n := range []int32{16, 8, 4, 2, 1} {
		next := lbl("rest" + strconv.Itoa(int(n)/2))
		if n == 1 {
			next = lbl("fold")
		}
		q := asm.Instructions{
			asm.Mov.Reg(r3, r2),
			asm.And.Imm(r3, n),
			asm.JEq.Imm(r3, 0, next),
			asm.Mov.Reg(r3, r1),
			asm.Add.Imm(r3, n),
			asm.JGT.Reg(r3, r9, "fp_length"),
		}
		if n != 16 {
			q[0] = q[0].WithSymbol(lbl("rest" + strconv.Itoa(int(n))))
		}
		switch n {
		case 2:
			q = append(q, asm.LoadMem(r3, r1, 0, H), asm.Add.Reg(r0, r3))
		case 1:
			q = append(q, asm.LoadMem(r3, r1, 0, B), asm.Add.Reg(r0, r3))
		default:
			for off := int16(0); off < int16(n); off += 4 {
				q = append(q, asm.LoadMem(r3, r1, off, W), asm.Add.Reg(r0, r3))
			}
		}
		p = append(p, append(q, asm.Add.Imm(r1, n))...)
	}
	// Fold the 64-bit sum to 16 bits: twice 32 (< 2^33, then < 2^32),
	// then thrice 16.
	fold := asm.Instructions{}
	for range 2 {
		fold = append(fold, asm.Mov.Reg(r3, r0), asm.RSh.Imm(r3, 32), asm.Mov.Reg32(r0, r0), asm.Add.Reg(r0, r3))
	}
	fold = append(fold, foldCarry(r0, r3)...)
	fold = append(fold, asm.Mov.Reg(r3, r0), asm.RSh.Imm(r3, 16), asm.And.Imm(r0, 0xffff), asm.Add.Reg(r0, r3))
	fold[0] = fold[0].WithSymbol(lbl("fold"))
	p = append(p, fold...)
	p = append(p,
		asm.JEq.Imm(r0, 0xffff, lbl("done")),
		asm.LoadMem(r2, r7, proto, B),
		asm.JEq.Imm(r2, 17, lbl("udpsum")),
	)
	// The checksum: the sum without the stored field, folded, complemented.
	// The field is bounds-checked anew: the verifier does not know that
	// the protocol read here is the one the L4 checks saw.
	store := func(field int16, udp bool) asm.Instructions {
		q := asm.Instructions{
			asm.Mov.Reg(r3, r7),
			asm.Add.Imm(r3, int32(l4+field+2)),
			asm.JGT.Reg(r3, r9, "fp_length"),
			asm.LoadMem(r3, r7, l4+field, H),
			asm.Xor.Imm(r3, 0xffff),
			asm.Add.Reg(r0, r3),
		}
		q = append(q, foldCarry(r0, r3)...)
		q = append(q, asm.Xor.Imm(r0, 0xffff))
		if udp {
			q = append(q, asm.JNE.Imm(r0, 0, lbl("put")), asm.Mov.Imm(r0, 0xffff))
			return append(q, asm.StoreMem(r7, l4+field, r0, H).WithSymbol(lbl("put")))
		}
		return append(q, asm.StoreMem(r7, l4+field, r0, H), asm.Ja.Label(lbl("count")))
	}
	p = append(p, store(16, false)...)
	udp := store(6, true)
	udp[0] = udp[0].WithSymbol(lbl("udpsum"))
	p = append(p, udp...)
	p = append(p, asm.StoreImm(r10, -4, int64(FastCsumFinished), W).WithSymbol(lbl("count")))
	p = append(p, countOne(lbl("done"))...)
	return append(p, asm.LoadMem(r5, r10, fpSavedR5, DW).WithSymbol(lbl("done")))
}

// foldCarry folds the carries of the one's-complement sum in acc into its
// low 16 bits (tmp is clobbered): twice, as the first fold may carry again.
func foldCarry(acc, tmp asm.Register) asm.Instructions {
	var p asm.Instructions
	for range 2 {
		p = append(p, asm.Mov.Reg(tmp, acc), asm.RSh.Imm(tmp, 16), asm.And.Imm(acc, 0xffff), asm.Add.Reg(acc, tmp))
	}
	return p
}

// portConf leaves r8 = the port's fastConf and goes to miss when there is
// none or its byte at flag (which fast path is on) is 0.
func portConf(flag int16, miss string) asm.Instructions {
	const r0, r2, r8, r10 = asm.R0, asm.R2, asm.R8, asm.R10
	p := asm.Instructions{asm.StoreImm(r10, -4, 0, asm.Word)}
	p = append(p, lookup(mapFPConf, -4)...)
	return append(p,
		asm.JEq.Imm(r0, 0, miss),
		asm.Mov.Reg(r8, r0),
		asm.LoadMem(r2, r8, flag, asm.Byte),
		asm.JEq.Imm(r2, 0, miss),
	)
}

// routeNextHop looks the route key at r10+key up in the LPM map m and
// leaves r8 = its next hop (both families): no route goes to "fp_noroute",
// a next hop without a device to "fp_neigh".
func routeNextHop(m string, key int32) asm.Instructions {
	const r0, r2, r8, r10 = asm.R0, asm.R2, asm.R8, asm.R10
	p := lookup(m, key)
	p = append(p,
		asm.JEq.Imm(r0, 0, "fp_noroute"),
		asm.LoadMem(r2, r0, 0, asm.Word),
		asm.StoreMem(r10, -4, r2, asm.Word),
	)
	p = append(p, lookup(mapFPNH, -4)...)
	return append(p,
		asm.JEq.Imm(r0, 0, "fp_noroute"),
		asm.Mov.Reg(r8, r0),
		asm.LoadMem(r2, r8, 0, asm.Word),
		asm.JEq.Imm(r2, 0, "fp_neigh"),
	)
}

// countOne adds 1 to the per-CPU counter whose index is at r10-4, going
// to miss without the counter.
func countOne(miss string) asm.Instructions {
	const r0, r2 = asm.R0, asm.R2
	p := lookup(mapFPStats, -4)
	return append(p,
		asm.JEq.Imm(r0, 0, miss),
		asm.LoadMem(r2, r0, 0, asm.DWord),
		asm.Add.Imm(r2, 1),
		asm.StoreMem(r0, 0, r2, asm.DWord),
	)
}

// fastPrologue emits what both families check first, at label entry:
// untagged (r7 right after the Ethernet header), the port's fast path on,
// the frame to the port's MAC. It leaves r8 = the port's fastConf.
func fastPrologue(entry string) asm.Instructions {
	const (
		r0, r1, r2, r3, r4, r6, r7, r8, r10 = asm.R0, asm.R1, asm.R2, asm.R3, asm.R4, asm.R6, asm.R7, asm.R8, asm.R10
		W, H, B                             = asm.Word, asm.Half, asm.Byte
	)
	p := asm.Instructions{
		asm.LoadMem(r2, r6, xdpMDData, W).WithSymbol(entry),
		asm.Add.Imm(r2, ethHeaderLen),
		asm.JNE.Reg(r2, r7, "ovfwd"),
	}
	p = append(p, portConf(6, "ovfwd")...)
	return append(p,
		asm.StoreImm(r10, fpPartialSum, 0, W),
		asm.Mov.Reg(r4, r7),
		asm.Add.Imm(r4, -ethHeaderLen),
		asm.LoadMem(r2, r4, 0, W),
		asm.LoadMem(r3, r8, 0, W),
		asm.JNE.Reg(r2, r3, "ovfwd"),
		asm.LoadMem(r2, r4, 4, H),
		asm.LoadMem(r3, r8, 4, H),
		asm.JNE.Reg(r2, r3, "ovfwd"),
	)
}

// fastPath6 emits the IPv6 fast path, entered at "fp6" like fastPath4 at
// "fp4" (r7 = the IPv6 header, 40 bytes of it in the frame): no extension
// header, hop limit > 1, TCP or UDP as for IPv4; the hop limit is
// decremented (no header checksum) and it joins the IPv4 path at "fp_l2".
func fastPath6() asm.Instructions {
	const (
		r0, r1, r2, r3, r4, r5, r7, r8, r9, r10 = asm.R0, asm.R1, asm.R2, asm.R3, asm.R4, asm.R5, asm.R7, asm.R8, asm.R9, asm.R10
		W, H, B                                 = asm.Word, asm.Half, asm.Byte
	)
	p := fastPrologue("fp6")
	p = append(p,
		asm.LoadMem(r2, r7, 0, B),
		asm.RSh.Imm(r2, 4),
		asm.JNE.Imm(r2, 6, "fp_options"),
		asm.LoadMem(r2, r7, 7, B),
		asm.JLE.Imm(r2, 1, "fp_ttl"),
		// r5 = payload length; the frame ends where it does.
		asm.LoadMem(r5, r7, 4, H),
		asm.HostTo(asm.BE, r5, asm.Half),
		// Linux 6.1's verifier forgets a byte swap's bounds (check_alu_op
		// marks a BPF_END result unknown) and refuses a packet pointer plus
		// an unbounded register; the mask gives r5 its 16 bits back.
		asm.And.Imm(r5, 0xffff),
		asm.Mov.Reg(r4, r7),
		asm.Add.Imm(r4, ipv6HeaderLen),
		asm.Add.Reg(r4, r5),
		asm.JGT.Reg(r4, r9, "fp_length"),
		asm.JLT.Reg(r4, r9, "fp_length"),
		asm.LoadMem(r2, r7, 6, B),
		asm.JEq.Imm(r2, 6, "fp6_tcp"),
		asm.JNE.Imm(r2, 17, "fp_l4"), // extension headers, ICMPv6, the rest
		asm.Mov.Reg(r4, r7),
		asm.Add.Imm(r4, ipv6HeaderLen+8),
		asm.JGT.Reg(r4, r9, "fp_l4"),
		asm.LoadMem(r2, r7, ipv6HeaderLen+4, H),
		asm.HostTo(asm.BE, r2, asm.Half),
		asm.JLT.Imm(r2, 8, "fp_l4"),
		asm.JGT.Reg(r2, r5, "fp_l4"),
	)
	p = append(p, partialCsum6(17, 6, "fp6_route")...)
	p = append(p,
		asm.Mov.Reg(r4, r7).WithSymbol("fp6_tcp"),
		asm.Add.Imm(r4, ipv6HeaderLen+20),
		asm.JGT.Reg(r4, r9, "fp_l4"),
		asm.LoadMem(r2, r7, ipv6HeaderLen+12, B),
		asm.RSh.Imm(r2, 4),
		asm.LSh.Imm(r2, 2),
		asm.JLT.Imm(r2, 20, "fp_l4"),
		asm.JGT.Reg(r2, r5, "fp_l4"),
		asm.Mov.Reg(r2, r5),
	)
	p = append(p, partialCsum6(6, 16, "fp6_syn")...)
	p = append(p,
		asm.LoadMem(r2, r8, 7, B).WithSymbol("fp6_syn"),
		asm.JEq.Imm(r2, 0, "fp6_route"),
		asm.LoadMem(r2, r7, ipv6HeaderLen+13, B),
		asm.And.Imm(r2, 0x02),
		asm.JNE.Imm(r2, 0, "fp_syn"),
	)
	p = append(p, fastMartian6()...)
	p = append(p,
		asm.StoreImm(r10, -24, 128, W).WithSymbol("fp6_lookup"),
	)
	for off := int16(0); off < 16; off += 4 {
		p = append(p, asm.LoadMem(r2, r7, 24+off, W), asm.StoreMem(r10, -20+off, r2, W))
	}
	p = append(p, routeNextHop(mapFPRoute6, -24)...)
	p = append(p,
		asm.LoadMem(r5, r7, 4, H),
		asm.HostTo(asm.BE, r5, asm.Half),
		asm.Add.Imm(r5, ipv6HeaderLen),
		asm.LoadMem(r2, r8, 4, W),
		asm.JGT.Reg(r5, r2, "fp_mtu"),
	)
	p = append(p, finishCsum(ipv6HeaderLen, 6, "6")...)
	p = append(p,
		asm.LoadMem(r3, r7, 7, B),
		asm.Add.Imm(r3, -1),
		asm.StoreMem(r7, 7, r3, B),
		asm.Ja.Label("fp_l2"),
	)
	return p
}

// fastPath4 emits the IPv4 fast path, entered at label "fp4" with r6 =
// ctx, r7 = the IPv4 header (20 bytes of it known to be in the frame), r9 =
// data_end. What it does not forward goes to label "ovfwd" (the bridge
// fast path, then the engine) or, counted as a punt, to "xsk". With
// verdictOnly (the BPF_PROG_TEST_RUN shape) it records the egress ifindex
// in the test map and returns XDP_REDIRECT instead of redirecting.
func fastPath4(verdictOnly bool) asm.Instructions {
	const (
		r0, r1, r2, r3, r4, r5, r6, r7, r8, r9, r10 = asm.R0, asm.R1, asm.R2, asm.R3, asm.R4, asm.R5, asm.R6, asm.R7, asm.R8, asm.R9, asm.R10
		W, H, B, DW                                 = asm.Word, asm.Half, asm.Byte, asm.DWord
	)
	punt := func(s FastStat) asm.Instructions {
		return asm.Instructions{asm.Mov.Imm(r3, int32(s)), asm.Ja.Label("fp_punt")}
	}
	p := fastPrologue("fp4")
	p = append(p,
		// Version 4, no options.
		asm.LoadMem(r2, r7, 0, B),
		asm.JNE.Imm(r2, 0x45, "fp_options"),
		// Fragments (MF or an offset) are the engine's.
		asm.LoadMem(r2, r7, 6, H),
		asm.And.Imm(r2, be16(0x3fff)),
		asm.JNE.Imm(r2, 0, "fp_fragment"),
		asm.LoadMem(r2, r7, 8, B),
		asm.JLE.Imm(r2, 1, "fp_ttl"),
		// The frame ends where the datagram does: r5 = total length.
		asm.LoadMem(r5, r7, 2, H),
		asm.HostTo(asm.BE, r5, asm.Half),
		asm.And.Imm(r5, 0xffff), // bounds for Linux 6.1's verifier, as in the IPv6 path
		asm.Mov.Reg(r4, r7),
		asm.Add.Reg(r4, r5),
		asm.JGT.Reg(r4, r9, "fp_length"),
		asm.JLT.Reg(r4, r9, "fp_length"),
	)
	// Header checksum: the one's-complement sum of the 10 words is 0xffff
	// (byte order does not matter for it).
	p = append(p, asm.LoadMem(r3, r7, 0, H))
	for off := int16(2); off < 20; off += 2 {
		p = append(p, asm.LoadMem(r2, r7, off, H), asm.Add.Reg(r3, r2))
	}
	p = append(p, foldCarry(r3, r2)...)
	p = append(p,
		asm.JNE.Imm(r3, 0xffff, "fp_checksum"),
		// TCP and UDP with a sound header (what the engine's parser
		// insists on), nothing else.
		asm.LoadMem(r2, r7, 9, B),
		asm.JEq.Imm(r2, 6, "fp_tcp"),
		asm.JNE.Imm(r2, 17, "fp_l4"),
		// UDP: 8 bytes, 8 ≤ length field ≤ what follows the IP header.
		asm.Mov.Reg(r4, r7),
		asm.Add.Imm(r4, 28),
		asm.JGT.Reg(r4, r9, "fp_l4"),
		asm.LoadMem(r2, r7, 24, H),
		asm.HostTo(asm.BE, r2, asm.Half),
		asm.JLT.Imm(r2, 8, "fp_l4"),
		asm.Mov.Reg(r3, r5),
		asm.Add.Imm(r3, -20),
		asm.JGT.Reg(r2, r3, "fp_l4"),
	)
	p = append(p, partialCsum(17, 6, "fp_route")...)
	p = append(p,
		// TCP: 20 bytes, 20 ≤ data offset ≤ what follows; SYN to the
		// engine when it clamps MSS.
		asm.Mov.Reg(r4, r7).WithSymbol("fp_tcp"),
		asm.Add.Imm(r4, 40),
		asm.JGT.Reg(r4, r9, "fp_l4"),
		asm.LoadMem(r2, r7, 32, B),
		asm.RSh.Imm(r2, 4),
		asm.LSh.Imm(r2, 2),
		asm.JLT.Imm(r2, 20, "fp_l4"),
		asm.Mov.Reg(r3, r5),
		asm.Add.Imm(r3, -20),
		asm.JGT.Reg(r2, r3, "fp_l4"),
		asm.Mov.Reg(r2, r3),
	)
	p = append(p, partialCsum(6, 16, "fp_syn4")...)
	p = append(p,
		asm.LoadMem(r2, r8, 7, B).WithSymbol("fp_syn4"),
		asm.JEq.Imm(r2, 0, "fp_route"),
		asm.LoadMem(r2, r7, 33, B),
		asm.And.Imm(r2, 0x02),
		asm.JNE.Imm(r2, 0, "fp_syn"),
	)
	p = append(p, fastMartian4()...)
	p = append(p,
		// Longest prefix match on the destination, then the next hop.
		asm.StoreImm(r10, -16, 32, W).WithSymbol("fp4_lookup"),
		asm.LoadMem(r2, r7, 16, W),
		asm.StoreMem(r10, -12, r2, W),
	)
	p = append(p, routeNextHop(mapFPRoute4, -16)...)
	p = append(p,
		// The datagram must fit the egress MTU (the engine fragments or
		// answers "too big").
		asm.LoadMem(r5, r7, 2, H),
		asm.HostTo(asm.BE, r5, asm.Half),
		asm.LoadMem(r2, r8, 4, W),
		asm.JGT.Reg(r5, r2, "fp_mtu"),
	)
	p = append(p, finishCsum(20, 9, "4")...)
	p = append(p,
		// TTL − 1 and the checksum for it, as the engine does (RFC 1624
		// eqn. 3, HC' = ~(~HC + ~m + m')): with m' = m − 0x0100, ~m + m' is
		// the constant 0xfeff, 0xfffe in the byte order of this load.
		asm.LoadMem(r3, r7, 10, H),
		asm.Xor.Imm(r3, 0xffff),
		asm.Add.Imm(r3, 0xfffe),
	)
	p = append(p, foldCarry(r3, r2)...)
	p = append(p,
		asm.Xor.Imm(r3, 0xffff),
		asm.StoreMem(r7, 10, r3, H),
		asm.LoadMem(r3, r7, 8, B),
		asm.Add.Imm(r3, -1),
		asm.StoreMem(r7, 8, r3, B),
		// MACs from the next hop (both families; r5 = the datagram's length).
		asm.Mov.Reg(r4, r7).WithSymbol("fp_l2"),
		asm.Add.Imm(r4, -ethHeaderLen),
		asm.LoadMem(r3, r8, 8, W),
		asm.StoreMem(r4, 0, r3, W),
		asm.LoadMem(r3, r8, 12, W),
		asm.StoreMem(r4, 4, r3, W),
		asm.LoadMem(r3, r8, 16, W),
		asm.StoreMem(r4, 8, r3, W),
		// Count: frames and bytes (the frame: datagram + Ethernet header)
		// in one counter (fastCount).
		asm.Mov.Reg(r3, r5).WithSymbol("fp_count"),
		asm.Add.Imm(r3, ethHeaderLen),
		asm.StoreMem(r10, -24, r3, DW),
		asm.StoreImm(r10, -4, int64(FastForwarded), W),
	)
	p = append(p, lookup(mapFPStats, -4)...)
	p = append(p,
		asm.JEq.Imm(r0, 0, "fp_out"),
		asm.LoadMem(r2, r0, 0, DW),
		asm.Add.Imm(r2, 1),
		asm.StoreMem(r0, 0, r2, DW),
		asm.LoadMem(r2, r0, 8, DW),
		asm.LoadMem(r3, r10, -24, DW),
		asm.Add.Reg(r2, r3),
		asm.StoreMem(r0, 8, r2, DW),
	)
	if verdictOnly {
		p = append(p,
			asm.LoadMem(r3, r8, 0, W).WithSymbol("fp_out"),
			asm.StoreMem(r10, -8, r3, W),
			asm.StoreImm(r10, -4, 0, W),
			asm.LoadMapPtr(r1, 0).WithReference(mapFPTest),
			asm.Mov.Reg(r2, r10),
			asm.Add.Imm(r2, -4),
			asm.Mov.Reg(r3, r10),
			asm.Add.Imm(r3, -8),
			asm.Mov.Imm(r4, 0),
			asm.FnMapUpdateElem.Call(),
			asm.Mov.Imm(r0, xdpRedirect),
			asm.Return(),
		)
	} else {
		// A device missing from the devmap drops (the control plane adds
		// a device before any next hop names it).
		p = append(p,
			asm.LoadMapPtr(r1, 0).WithReference(mapFPDevs).WithSymbol("fp_out"),
			asm.LoadMem(r2, r8, 0, W),
			asm.Mov.Imm(r3, xdpDrop),
			asm.FnRedirectMap.Call(),
			asm.Return(),
		)
	}
	for _, c := range []struct {
		label string
		stat  FastStat
	}{{"fp_options", FastPuntOptions}, {"fp_fragment", FastPuntFragment}, {"fp_ttl", FastPuntTTL},
		{"fp_length", FastPuntLength}, {"fp_checksum", FastPuntChecksum}, {"fp_l4", FastPuntL4},
		{"fp_syn", FastPuntSYN}, {"fp_noroute", FastPuntNoRoute}, {"fp_neigh", FastPuntNextHop}, {"fp_mtu", FastPuntMTU},
		{"fp_partial", FastPuntPartial}, {"fpb_vlan", FastPuntVLAN}, {"fpb_flood", FastPuntFlood}, {"fpb_learn", FastPuntLearn}, {"fp_martian", FastPuntMartian}} {
		q := punt(c.stat)
		q[0] = q[0].WithSymbol(c.label)
		p = append(p, q...)
	}
	// Count the punt (r3 = counter) and hand the frame to the engine.
	p = append(p, asm.StoreMem(r10, -4, r3, W).WithSymbol("fp_punt"))
	p = append(p, countOne("xsk")...)
	return append(p, asm.Ja.Label("xsk"))
}

// fastMartian4 emits the engine's martian test (fwd's martian.go, RFC 1812
// §5.3.7 and §4.2.2.11) at label "fp_route", where a routable IPv4 frame
// arrives before its route lookup (r7 = the header): a source or
// destination in 0/8, 127/8 or 224/4, or 255.255.255.255, or a source
// that is one of the engine's addresses, goes to "fp_martian" (punted: the
// engine drops and counts it); the rest falls through. As in the engine,
// the own-address test every frame takes is a byte lookup by the source's
// last byte; only a hit looks the address up.
func fastMartian4() asm.Instructions {
	const r0, r2, r7, r10 = asm.R0, asm.R2, asm.R7, asm.R10
	never := func(off int16, sym, next string) asm.Instructions {
		return asm.Instructions{
			asm.LoadMem(r2, r7, off, asm.Byte).WithSymbol(sym),
			asm.JEq.Imm(r2, 0, "fp_martian"),
			asm.JEq.Imm(r2, 127, "fp_martian"),
			asm.JEq.Imm(r2, 255, sym+"_255"),
			asm.And.Imm(r2, 0xf0),
			asm.JEq.Imm(r2, 0xe0, "fp_martian"),
			asm.Ja.Label(next),
			asm.LoadMem(r2, r7, off, asm.Word).WithSymbol(sym + "_255"),
			asm.JEq.Imm32(r2, -1, "fp_martian"),
		}
	}
	p := never(12, "fp_route", "fp4_mdst")
	p = append(p, never(16, "fp4_mdst", "fp4_mown")...)
	p = append(p, asm.StoreImm(r10, -8, 0, asm.Word).WithSymbol("fp4_mown"))
	p = append(p, lookup(mapFPOwn, -8)...)
	p = append(p,
		asm.JEq.Imm(r0, 0, "fp4_lookup"),
		asm.LoadMem(r2, r7, 15, asm.Byte),
		asm.Add.Reg(r0, r2),
		asm.LoadMem(r2, r0, 0, asm.Byte),
		asm.JEq.Imm(r2, 0, "fp4_lookup"),
		asm.LoadMem(r2, r7, 12, asm.Word),
		asm.StoreMem(r10, -8, r2, asm.Word),
	)
	p = append(p, lookup(mapFPOwn4, -8)...)
	return append(p, asm.JNE.Imm(r0, 0, "fp_martian"))
}

// fastMartian6 is fastMartian4 for IPv6 (RFC 4291 §2.5.2, §2.5.3, §2.5.6,
// §2.7), at label "fp6_route", falling through to "fp6_lookup": a source or
// destination ::, ::1 or in ff00::/8, or fe80::/10 at either end unless the
// destination is one of the engine's addresses. Only an address whose
// first byte is 0x00, 0xfe or 0xff takes the full test.
func fastMartian6() asm.Instructions {
	const r0, r2, r3, r7, r10 = asm.R0, asm.R2, asm.R3, asm.R7, asm.R10
	W, H, B := asm.Word, asm.Half, asm.Byte
	p := asm.Instructions{
		asm.LoadMem(r2, r7, 8, B).WithSymbol("fp6_route"),
		asm.JEq.Imm(r2, 0, "fp6_mart"),
		asm.JGE.Imm(r2, 0xfe, "fp6_mart"),
		asm.LoadMem(r2, r7, 24, B),
		asm.JEq.Imm(r2, 0, "fp6_mart"),
		asm.JLT.Imm(r2, 0xfe, "fp6_lookup"),
		asm.LoadMem(r2, r7, 8, B).WithSymbol("fp6_mart"),
		asm.JEq.Imm(r2, 0xff, "fp_martian"),
		asm.LoadMem(r2, r7, 24, B),
		asm.JEq.Imm(r2, 0xff, "fp_martian"),
	}
	// :: and ::1 (the last word 0 or 1 in network order, loaded little-endian).
	for i, off := range []int16{8, 24} {
		next := "fp6_unspec" + strconv.Itoa(i+1)
		q := asm.Instructions{
			asm.LoadMem(r2, r7, off, W),
			asm.LoadMem(r3, r7, off+4, W),
			asm.Or.Reg(r2, r3),
			asm.LoadMem(r3, r7, off+8, W),
			asm.Or.Reg(r2, r3),
			asm.JNE.Imm(r2, 0, next),
			asm.LoadMem(r3, r7, off+12, W),
			asm.JEq.Imm(r3, 0, "fp_martian"),
			asm.JEq.Imm(r3, 0x01000000, "fp_martian"),
		}
		if i > 0 {
			q[0] = q[0].WithSymbol("fp6_unspec" + strconv.Itoa(i))
		}
		p = append(p, q...)
	}
	p = append(p,
		// fe80::/10 at either end: the first 10 bits, loaded little-endian.
		asm.LoadMem(r2, r7, 8, H).WithSymbol("fp6_unspec2"),
		asm.And.Imm(r2, be16(0xffc0)),
		asm.JEq.Imm(r2, be16(0xfe80), "fp6_ll"),
		asm.LoadMem(r2, r7, 24, H),
		asm.And.Imm(r2, be16(0xffc0)),
		asm.JNE.Imm(r2, be16(0xfe80), "fp6_lookup"),
	)
	for off := int16(0); off < 16; off += 4 {
		q := asm.Instructions{asm.LoadMem(r2, r7, 24+off, W), asm.StoreMem(r10, -20+off, r2, W)}
		if off == 0 {
			q[0] = q[0].WithSymbol("fp6_ll")
		}
		p = append(p, q...)
	}
	p = append(p, lookup(mapFPOwn6, -20)...)
	// To one of ours: not routed here either way (its next hop punts).
	return append(p, asm.JEq.Imm(r0, 0, "fp_martian"))
}

// fastBridge emits the bridge fast path at label "ovfwd", where every
// frame bound for the engine arrives (r6 = ctx, r9 = data_end): an
// untagged unicast frame whose source was learned on this port and whose
// destination was learned on another port that is a redirect target and
// carries the VLAN untagged, within its MTU, is redirected there
// unchanged; the rest goes on to "xsk". It leaves r8 = the fastMAC
// (ifindex at 0) and r5 = the frame's length without the Ethernet header
// for the routed path's counting tail at "fp_count".
func fastBridge() asm.Instructions {
	const (
		r0, r1, r2, r3, r4, r5, r6, r7, r8, r9, r10 = asm.R0, asm.R1, asm.R2, asm.R3, asm.R4, asm.R5, asm.R6, asm.R7, asm.R8, asm.R9, asm.R10
		W, H, B                                     = asm.Word, asm.Half, asm.Byte
	)
	// key stores the MAC at r7+off and the port's PVID (r8+10) at fp-16.
	key := func(off int16) asm.Instructions {
		p := asm.Instructions{
			asm.LoadMem(r2, r7, off, W),
			asm.StoreMem(r10, -16, r2, W),
			asm.LoadMem(r2, r7, off+4, H),
			asm.StoreMem(r10, -12, r2, H),
			asm.LoadMem(r2, r8, 10, H),
			asm.StoreMem(r10, -10, r2, H),
		}
		return append(p, lookup(mapFPMACs, -16)...)
	}
	p := asm.Instructions{
		asm.LoadMem(r7, r6, xdpMDData, W).WithSymbol("ovfwd"),
		asm.Mov.Reg(r2, r7),
		asm.Add.Imm(r2, ethHeaderLen),
		asm.JGT.Reg(r2, r9, "xsk"),
	}
	p = append(p, portConf(8, "xsk")...)
	p = append(p,
		// Tags are the engine's (membership, retagging); so is a port
		// without an untagged VLAN (it drops).
		asm.LoadMem(r2, r7, 12, H),
		asm.JEq.Imm(r2, be16(ethTypeVLAN), "fpb_vlan"),
		asm.JEq.Imm(r2, be16(ethTypeQinQ), "fpb_vlan"),
		asm.LoadMem(r2, r8, 10, H),
		asm.JEq.Imm(r2, 0, "fpb_vlan"),
		// Group destinations flood, group sources are dropped: the engine's.
		asm.LoadMem(r2, r7, 0, B),
		asm.And.Imm(r2, 1),
		asm.JNE.Imm(r2, 0, "fpb_flood"),
		asm.LoadMem(r2, r7, 6, B),
		asm.And.Imm(r2, 1),
		asm.JNE.Imm(r2, 0, "fpb_learn"),
		// The box's own MAC is the engine's too.
		asm.LoadMem(r2, r7, 0, W),
		asm.LoadMem(r3, r8, 0, W),
		asm.JNE.Reg(r2, r3, "fpb_src"),
		asm.LoadMem(r2, r7, 4, H),
		asm.LoadMem(r3, r8, 4, H),
		asm.JEq.Reg(r2, r3, "fp_neigh"),
	)
	// The source must be known on this port: a new or moved station's
	// frames teach the engine (forwarded here they would teach it nothing).
	src := key(6)
	src[0] = src[0].WithSymbol("fpb_src")
	p = append(p, src...)
	p = append(p,
		asm.JEq.Imm(r0, 0, "fpb_learn"),
		asm.LoadMem(r2, r0, 8, W),
		asm.LoadMem(r3, r8, 12, W),
		asm.JNE.Reg(r2, r3, "fpb_learn"),
	)
	p = append(p, key(0)...)
	p = append(p,
		asm.JEq.Imm(r0, 0, "fpb_flood"),
		// Learned on this port: the engine drops it (DropLoop).
		asm.LoadMem(r2, r0, 8, W),
		asm.LoadMem(r3, r8, 12, W),
		asm.JEq.Reg(r2, r3, "fp_neigh"),
		asm.Mov.Reg(r8, r0),
		asm.LoadMem(r2, r8, 0, W),
		asm.JEq.Imm(r2, 0, "fp_neigh"),
		asm.Mov.Reg(r1, r6),
		asm.FnXdpGetBuffLen.Call(),
		asm.Mov.Reg(r5, r0),
		asm.Add.Imm(r5, -ethHeaderLen),
		asm.LoadMem(r2, r8, 4, W),
		asm.JGT.Reg(r5, r2, "fp_mtu"),
		asm.Ja.Label("fp_count"),
	)
	return p
}
