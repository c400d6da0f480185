package afxdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// DropCounter is an XDP program that counts frames and bytes in a per-CPU
// array and drops them: a sink that costs the receiving side almost
// nothing, for benchmarks and tests.
type DropCounter struct {
	counts *ebpf.Map
	prog   *ebpf.Program
	link   link.Link
	mode   AttachMode
}

// sinkCounts is the per-CPU value of the counter map.
type sinkCounts struct{ Packets, Bytes uint64 }

const mapSink = "ovfwd_sink"

// NewDropCounter loads the program; Attach puts it on a device.
func NewDropCounter() (*DropCounter, error) { return newDropCounter(nil) }

// NewDropCounterFor counts and drops only IPv4 packets to dst and passes
// everything else to the kernel (ARP, pings to the host itself), for a
// sink host that must still answer: its own receive work would otherwise
// be charged to whoever transmits to it over a veth.
func NewDropCounterFor(dst netip.Prefix) (*DropCounter, error) {
	if !dst.Addr().Is4() {
		return nil, fmt.Errorf("afxdp: drop counter filter %v: IPv4 prefixes only", dst)
	}
	return newDropCounter(ipv4DstFilter(dst.Masked()))
}

func newDropCounter(filter asm.Instructions) (*DropCounter, error) {
	counts, err := ebpf.NewMap(&ebpf.MapSpec{Name: mapSink, Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 16, MaxEntries: 1})
	if err != nil {
		return nil, fmt.Errorf("afxdp: create map %s: %w", mapSink, err)
	}
	c := &DropCounter{counts: counts}
	insns := append(filter, dropCounterProgram()...)
	if err := insns.AssociateMap(mapSink, counts); err != nil {
		c.Close()
		return nil, err
	}
	if c.prog, err = loadXDP("ovfwd_sink", insns); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// ipv4DstFilter passes (XDP_PASS) every frame that is not an untagged
// IPv4 packet to dst and falls through to the counter for the rest. A
// packet's bytes load in host order (little-endian: the only order this
// appliance runs in), so the constants are the prefix's bytes read the
// same way.
func ipv4DstFilter(dst netip.Prefix) asm.Instructions {
	a := dst.Addr().As4()
	var m [4]byte
	binary.BigEndian.PutUint32(m[:], ^uint32(0)<<(32-dst.Bits()))
	if dst.Bits() == 0 {
		m = [4]byte{}
	}
	net, mask := binary.LittleEndian.Uint32(a[:]), binary.LittleEndian.Uint32(m[:])
	return asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, xdpMDData, asm.Word),
		asm.LoadMem(asm.R3, asm.R1, xdpMDDataEnd, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, 34), // Ethernet + IPv4 header
		asm.JGT.Reg(asm.R4, asm.R3, "pass"),
		asm.LoadMem(asm.R4, asm.R2, 12, asm.Half),
		asm.JNE.Imm(asm.R4, 0x0008, "pass"), // EtherType 0x0800 read little-endian
		asm.LoadMem(asm.R4, asm.R2, 30, asm.Word),
		asm.And.Imm32(asm.R4, int32(mask)),
		asm.JNE.Imm32(asm.R4, int32(net), "pass"),
		asm.Ja.Label("count"),
		asm.Mov.Imm(asm.R0, xdpPass).WithSymbol("pass"),
		asm.Return(),
	}
}

// dropCounterProgram: counts[0].Packets++, counts[0].Bytes += len; XDP_DROP.
func dropCounterProgram() asm.Instructions {
	p := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1).WithSymbol("count"),
		asm.Mov.Imm(asm.R2, 0),
		asm.StoreMem(asm.R10, -4, asm.R2, asm.Word),
	}
	p = append(p, lookup(mapSink, -4)...)
	return append(p,
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
		asm.LoadMem(asm.R2, asm.R6, xdpMDDataEnd, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, xdpMDData, asm.Word),
		asm.Sub.Reg(asm.R2, asm.R3),
		asm.LoadMem(asm.R1, asm.R0, 8, asm.DWord),
		asm.Add.Reg(asm.R1, asm.R2),
		asm.StoreMem(asm.R0, 8, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, xdpDrop).WithSymbol("out"),
		asm.Return(),
	)
}

// Attach attaches the counter to ifindex (native first unless want says).
func (c *DropCounter) Attach(ifindex int, want AttachMode) (AttachMode, error) {
	a, err := attachXDP(&c.link, &c.mode, c.prog, ifindex, want)
	return a.Mode, err
}

// Count returns the packets and bytes counted so far, summed over CPUs.
func (c *DropCounter) Count() (packets, bytes uint64, err error) {
	var perCPU []sinkCounts
	if err := c.counts.Lookup(uint32(0), &perCPU); err != nil {
		return 0, 0, fmt.Errorf("afxdp: read sink counters: %w", err)
	}
	for _, v := range perCPU {
		packets += v.Packets
		bytes += v.Bytes
	}
	return packets, bytes, nil
}

// Close detaches and frees the program.
func (c *DropCounter) Close() error {
	var errs []error
	if c.link != nil {
		errs = append(errs, c.link.Close())
		c.link = nil
	}
	if c.prog != nil {
		errs = append(errs, c.prog.Close())
		c.prog = nil
	}
	if c.counts != nil {
		errs = append(errs, c.counts.Close())
		c.counts = nil
	}
	return errors.Join(errs...)
}
