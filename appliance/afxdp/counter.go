package afxdp

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// DropCounter is an XDP program that counts frames and bytes in a per-CPU
// array and drops them: a sink that costs the receiving side almost
// nothing, for benchmarks and tests.
type DropCounter struct {
	counts int
	prog   int
	link   int
	mode   AttachMode
	ncpu   int
}

// NewDropCounter loads the program; Attach puts it on a device.
func NewDropCounter() (*DropCounter, error) {
	ncpu, err := possibleCPUs()
	if err != nil {
		return nil, err
	}
	c := &DropCounter{counts: -1, prog: -1, link: -1, ncpu: ncpu}
	if c.counts, err = bpfMapCreate("ovfwd_sink", unix.BPF_MAP_TYPE_PERCPU_ARRAY, 4, 16, 1); err != nil {
		return nil, err
	}
	p := &prog{}
	p.Mov(r6, r1)
	p.MovImm(r2, 0)
	p.Store(sizeW, r10, -4, r2)
	p.LoadMapFD(r1, c.counts)
	p.Mov(r2, r10)
	p.AddImm(r2, -4)
	p.Call(bpfFuncMapLookup)
	p.JmpImm(jmpJEQ, r0, 0, "out")
	p.Load(sizeDW, r1, r0, 0)
	p.AddImm(r1, 1)
	p.Store(sizeDW, r0, 0, r1)
	p.Load(sizeW, r2, r6, xdpMDDataEnd)
	p.Load(sizeW, r3, r6, xdpMDData)
	p.Sub(r2, r3)
	p.Load(sizeDW, r1, r0, 8)
	p.Add(r1, r2)
	p.Store(sizeDW, r0, 8, r1)
	p.Label("out")
	p.Return(xdpDrop)
	insns, err := p.assemble()
	if err == nil {
		c.prog, err = bpfProgLoad("ovfwd_sink", insns)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Attach attaches the counter to ifindex (native first unless want says).
func (c *DropCounter) Attach(ifindex int, want AttachMode) (AttachMode, error) {
	m, _, err := attachXDP(&c.link, &c.mode, c.prog, ifindex, want)
	return m, err
}

// Count returns the packets and bytes counted so far, summed over CPUs.
func (c *DropCounter) Count() (packets, bytes uint64, err error) {
	val := make([]byte, 16*c.ncpu)
	if err := bpfMapLookup(c.counts, u32le(0), val); err != nil {
		return 0, 0, fmt.Errorf("afxdp: read sink counters: %w", err)
	}
	for i := 0; i < c.ncpu; i++ {
		packets += binary.LittleEndian.Uint64(val[16*i:])
		bytes += binary.LittleEndian.Uint64(val[16*i+8:])
	}
	return packets, bytes, nil
}

// Close detaches and frees the program.
func (c *DropCounter) Close() error {
	for _, fd := range []*int{&c.link, &c.prog, &c.counts} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
	return nil
}

// possibleCPUs is the kernel's possible-CPU count, the stride of per-CPU map values.
func possibleCPUs() (int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, found := strings.Cut(r, "-")
		l, err := strconv.Atoi(lo)
		if err != nil {
			return 0, fmt.Errorf("afxdp: parse cpu/possible %q", b)
		}
		h := l
		if found {
			if h, err = strconv.Atoi(hi); err != nil {
				return 0, fmt.Errorf("afxdp: parse cpu/possible %q", b)
			}
		}
		n = max(n, h+1)
	}
	return n, nil
}
