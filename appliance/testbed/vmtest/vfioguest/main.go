// Command vfioguest is the VFIO test that runs inside the vmtest guest (see
// appliance/testbed/vmtest/vfio_test.go, which builds it static, boots it
// and checks its report). It drives QEMU's e1000e and edu devices through
// the project's own VFIO layer (mlx5.OpenVFIO and the Bus it returns) and
// prints one line per step: "STEP name: ok detail" or "STEP name: FAIL
// why". A panic inside a step is caught and reported as FAIL with its stack.
//
// mlx5.OpenVFIO accepts only ConnectX functions, so the guest bind-mounts
// files holding 15b3:1017 over the sysfs vendor and device attributes of
// the emulated functions; everything else (driver, IOMMU group, config
// space, BARs, interrupts) is the real kernel's and device's.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ovfwd/ovfwd/mlx5"
)

// The guest's PCI layout (vfio_test.go places the devices).
const (
	e1000e   = "0000:00:03.0" // 8086:10d3, MSI-X
	edu      = "0000:00:04.0" // 1234:11e8, MSI, DMA engine
	serial   = "0000:00:05.0" // pci-serial: BAR0 is I/O ports, not mappable
	eduShare = "0000:01:01.0" // behind a PCI bridge, sharing its group with...
	serShare = "0000:01:02.0" // ...a pci-serial the kernel's 8250 driver owns
)

const hugepages = 4 // budget passed to OpenVFIO, like ovfwd probe's

type guest struct {
	fails int
	ovfwd string
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: vfioguest full|nointremap|lowmem CMD...|memlock-child")
		os.Exit(2)
	}
	g := &guest{ovfwd: "/bin/ovfwd"}
	switch os.Args[1] {
	case "full":
		g.full()
	case "nointremap":
		g.noIntremap()
	case "lowmem":
		// Lower RLIMIT_MEMLOCK to 64 KiB and become CMD: the parent runs
		// this as an unprivileged user, so CAP_IPC_LOCK cannot lift it.
		lim := unix.Rlimit{Cur: 64 << 10, Max: 64 << 10}
		if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &lim); err != nil {
			fmt.Println("STEP lowmem setrlimit: FAIL", err)
			os.Exit(1)
		}
		err := syscall.Exec(os.Args[2], os.Args[2:], os.Environ())
		fmt.Println("STEP lowmem exec: FAIL", err)
		os.Exit(1)
	case "memlock-child":
		g.memlockChild()
		os.Exit(min(g.fails, 1))
	default:
		fmt.Fprintln(os.Stderr, "vfioguest: unknown mode", os.Args[1])
		os.Exit(2)
	}
	fmt.Printf("VMTEST done fails=%d\n", g.fails)
	if g.fails > 0 {
		os.Exit(1)
	}
}

// step runs f and prints its outcome; a panic is a failure, with its stack.
func (g *guest) step(name string, f func() (string, error)) bool {
	detail, err := func() (d string, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
			}
		}()
		return f()
	}()
	if err != nil {
		g.fails++
		lines := strings.Split(strings.TrimRight(err.Error(), "\n"), "\n")
		fmt.Printf("STEP %s: FAIL %s\n", name, lines[0])
		for _, l := range lines[1:] {
			fmt.Printf("  | %s\n", l)
		}
		return false
	}
	fmt.Printf("STEP %s: ok %s\n", name, detail)
	return true
}

// wantErr is a step that must fail with an error (never a panic) whose
// text contains want.
func (g *guest) wantErr(name, want string, f func() error) {
	g.step(name, func() (string, error) {
		err := f()
		switch {
		case err == nil:
			return "", errors.New("succeeded, want an error")
		case !strings.Contains(err.Error(), want):
			return "", fmt.Errorf("error %q does not say %q", err, want)
		}
		return "error: " + strings.ReplaceAll(err.Error(), "\n", " / "), nil
	})
}

// probe runs `ovfwd probe -pci addr` (optionally through prefix, e.g. the
// lowmem wrapper) and prints its diagnosis; it must exit non-zero and say
// want.
func (g *guest) probe(name, addr, want string, prefix []string, cred *syscall.Credential) {
	g.step("probe "+name, func() (string, error) {
		args := append(append([]string{}, prefix...), g.ovfwd, "probe", "-pci", addr)
		cmd := exec.Command(args[0], args[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := cmd.CombinedOutput()
		for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
			fmt.Printf("PROBE %s| %s\n", name, l)
		}
		if err == nil {
			return "", errors.New("ovfwd probe exited 0")
		}
		if strings.Contains(string(out), "panic:") {
			return "", errors.New("ovfwd probe panicked")
		}
		if !strings.Contains(string(out), want) {
			return "", fmt.Errorf("ovfwd probe output does not say %q", want)
		}
		return fmt.Sprintf("exit %v, says %q", err, want), nil
	})
}

// --- setup -----------------------------------------------------------------

func sysDev(addr, attr string) string { return filepath.Join("/sys/bus/pci/devices", addr, attr) }

func driverOf(addr string) string {
	l, err := os.Readlink(sysDev(addr, "driver"))
	if err != nil {
		return ""
	}
	return filepath.Base(l)
}

// bind hands addr to vfio-pci through driver_override, as an operator does.
func (g *guest) bind(addr string) {
	g.step("bind "+addr+" to vfio-pci", func() (string, error) {
		was := driverOf(addr)
		if err := os.WriteFile(sysDev(addr, "driver_override"), []byte("vfio-pci"), 0); err != nil {
			return "", err
		}
		if was != "" {
			if err := os.WriteFile(sysDev(addr, "driver/unbind"), []byte(addr), 0); err != nil {
				return "", err
			}
		}
		if err := os.WriteFile("/sys/bus/pci/drivers_probe", []byte(addr), 0); err != nil {
			return "", err
		}
		if d := driverOf(addr); d != "vfio-pci" {
			return "", fmt.Errorf("driver is %q after drivers_probe", d)
		}
		grp, _ := os.Readlink(sysDev(addr, "iommu_group"))
		return fmt.Sprintf("was %q, IOMMU group %s", was, filepath.Base(grp)), nil
	})
}

// fakeConnectX bind-mounts a ConnectX-5's IDs over addr's sysfs vendor and
// device files, the only substitution the test makes.
func (g *guest) fakeConnectX(addr string) {
	g.step("substitute 15b3:1017 for the sysfs IDs of "+addr, func() (string, error) {
		dir := filepath.Join("/run/vmtest", addr)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		for attr, val := range map[string]string{"vendor": "0x15b3\n", "device": "0x1017\n"} {
			src := filepath.Join(dir, attr)
			if err := os.WriteFile(src, []byte(val), 0o444); err != nil {
				return "", err
			}
			if err := unix.Mount(src, sysDev(addr, attr), "", unix.MS_BIND, ""); err != nil {
				return "", fmt.Errorf("bind mount over %s: %w", sysDev(addr, attr), err)
			}
		}
		return "", nil
	})
}

func setHugepages(n int) error {
	if err := os.WriteFile("/proc/sys/vm/nr_hugepages", []byte(strconv.Itoa(n)), 0); err != nil {
		return err
	}
	if got := meminfo("HugePages_Total"); got != n {
		return fmt.Errorf("HugePages_Total %d after asking for %d", got, n)
	}
	return nil
}

func meminfo(key string) int {
	b, _ := os.ReadFile("/proc/meminfo")
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, key+":"); ok {
			n, _ := strconv.Atoi(strings.Fields(rest)[0])
			return n
		}
	}
	return -1
}

// fds lists the targets of this process's open fds.
func fds() []string {
	ents, _ := os.ReadDir("/proc/self/fd")
	var out []string
	for _, e := range ents {
		if t, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil {
			out = append(out, t)
		}
	}
	return out
}

func countFDs(prefix string) int {
	n := 0
	for _, f := range fds() {
		if strings.HasPrefix(f, prefix) {
			n++
		}
	}
	return n
}

// noLeak checks that no VFIO fd is open: after a failed or closed open the
// group must be free for the next one.
func noLeak() error {
	var left []string
	for _, f := range fds() {
		if strings.HasPrefix(f, "/dev/vfio") || strings.Contains(f, "vfio-device") {
			left = append(left, f)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("VFIO fds still open: %v", left)
	}
	return nil
}

// regs is BAR0 of a little-endian device. The mlx5 MMIO seam byte-swaps
// for ConnectX's big-endian registers; swapping back gives the device's
// value, and each access is still exactly one 32-bit load or store.
type regs struct{ m mlx5.MMIO }

func (r regs) read(off uint32) uint32     { return bits.ReverseBytes32(r.m.Read32(off)) }
func (r regs) write(off uint32, v uint32) { r.m.Write32(off, bits.ReverseBytes32(v)) }

// waitIRQ waits for the eventfd to be signalled and returns its count.
func waitIRQ(fd int, timeout time.Duration) (uint64, error) {
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(timeout)
	for {
		n, err := unix.Poll(p, int(time.Until(deadline).Milliseconds())+1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n == 0 {
			return 0, fmt.Errorf("no interrupt within %v", timeout)
		}
		var b [8]byte
		if _, err := unix.Read(fd, b[:]); err != nil {
			return 0, err
		}
		return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24, nil
	}
}

// busMaster sets memory space and bus master through the VFIO config
// region: without it the device's DMA and MSI writes are dropped.
func busMaster(v *mlx5.VFIO) (string, error) {
	cmd, err := v.ReadConfig16(0x04)
	if err != nil {
		return "", err
	}
	if err := v.WriteConfig16(0x04, cmd|0x6); err != nil {
		return "", err
	}
	got, err := v.ReadConfig16(0x04)
	if err != nil {
		return "", err
	}
	if got&0x6 != 0x6 {
		return "", fmt.Errorf("PCI command %#04x after writing %#04x", got, cmd|0x6)
	}
	return fmt.Sprintf("PCI command %#04x -> %#04x", cmd, got), nil
}

// --- the guest with interrupt remapping ------------------------------------

func (g *guest) full() {
	for _, a := range []string{e1000e, edu, serial, eduShare} {
		g.bind(a)
	}
	for _, a := range []string{e1000e, edu, serial, eduShare} {
		g.fakeConnectX(a)
	}
	g.step("reserve 16 hugepages", func() (string, error) { return "", setHugepages(16) })

	g.e1000eOpen()
	g.step("e1000e reopen after Close", func() (string, error) {
		v, err := mlx5.OpenVFIO(mlx5.DefaultPaths, e1000e, hugepages)
		if err != nil {
			return "", err
		}
		_, iova, err := v.Bus().DMA.Alloc(4096, 4096)
		quiesceE1000e(v)
		if cerr := v.Close(); err == nil {
			err = cerr
		}
		return fmt.Sprintf("DMA at %#x", iova), err
	})
	g.eduDMA()
	g.step("edu reopen after Close", func() (string, error) {
		v, err := mlx5.OpenVFIO(mlx5.DefaultPaths, edu, hugepages)
		if err != nil {
			return "", err
		}
		id := regs{v.Bus().MMIO}.read(0)
		if err := v.Close(); err != nil {
			return "", err
		}
		return fmt.Sprintf("id %#x", id), noLeak()
	})

	g.nonViable()
	g.barRefused()
	g.memlock()
	g.noHugepages()
}

func (g *guest) e1000eOpen() {
	var v *mlx5.VFIO
	if !g.step("e1000e OpenVFIO", func() (string, error) {
		var err error
		v, err = mlx5.OpenVFIO(mlx5.DefaultPaths, e1000e, hugepages)
		return "", err
	}) {
		return
	}
	info := v.Info()
	g.step("e1000e container, group and device fds", func() (string, error) {
		want := []string{"/dev/vfio/vfio", "/dev/vfio/" + info.Group, "anon_inode:[vfio-device]", "anon_inode:[eventfd]"}
		open := strings.Join(fds(), " ")
		for _, w := range want {
			if !strings.Contains(open, w) {
				return "", fmt.Errorf("no fd on %s among %s", w, open)
			}
		}
		return strings.Join(want, ", "), nil
	})
	g.step("e1000e VFIO API version, type1v2 IOMMU, SET_IOMMU", func() (string, error) {
		if info.IOMMU != "type1v2" {
			return "", fmt.Errorf("IOMMU %q, want type1v2", info.IOMMU)
		}
		return "group " + info.Group + " in a type1v2 container", nil
	})
	g.step("e1000e IOMMU info and IOVA ranges", func() (string, error) {
		if len(info.IOVARanges) == 0 || info.PageSize != 4096 {
			return "", fmt.Errorf("page %d, ranges %#x", info.PageSize, info.IOVARanges)
		}
		return fmt.Sprintf("page %d, ranges %#x", info.PageSize, info.IOVARanges), nil
	})
	g.step("e1000e BAR0 mmap", func() (string, error) {
		if info.BAR0Size != 128<<10 {
			return "", fmt.Errorf("BAR0 of %d bytes, want 128 KiB", info.BAR0Size)
		}
		maps, _ := os.ReadFile("/proc/self/maps")
		if !bytes.Contains(maps, []byte("vfio-device")) {
			return "", errors.New("no vfio-device mapping in /proc/self/maps")
		}
		return fmt.Sprintf("%d bytes mapped from the device fd", info.BAR0Size), nil
	})
	g.step("e1000e config region", func() (string, error) {
		ven, err := v.ReadConfig16(0)
		if err != nil {
			return "", err
		}
		dev, _ := v.ReadConfig16(2)
		if ven != 0x8086 || dev != 0x10d3 {
			return "", fmt.Errorf("config space IDs %04x:%04x, want 8086:10d3", ven, dev)
		}
		return "IDs 8086:10d3 read from the device (sysfs says 15b3:1017)", nil
	})
	r := regs{v.Bus().MMIO}
	g.step("e1000e BAR0 register read/write", func() (string, error) {
		const rdbah = 0x2804 // RX descriptor base high: plain read/write
		r.write(rdbah, 0x12345678)
		if got := r.read(rdbah); got != 0x12345678 {
			return "", fmt.Errorf("RDBAH reads %#x after writing 0x12345678", got)
		}
		r.write(rdbah, 0)
		return fmt.Sprintf("RDBAH round trip, STATUS %#x", r.read(0x8)), nil
	})
	g.step("e1000e bus master via config write", func() (string, error) { return busMaster(v) })
	g.step("e1000e MSI-X eventfd fires on a raised interrupt", func() (string, error) {
		if info.IRQ != "MSI-X" {
			return "", fmt.Errorf("vector 0 is on %s, want MSI-X", info.IRQ)
		}
		const (
			ivar = 0x000E4
			ims  = 0x000D0
			ics  = 0x000C8
			icr  = 0x000C0
			rxq0 = 1 << 20 // ICR.RxQ0
		)
		r.write(ivar, 0x8) // RxQ0 -> MSI-X vector 0, valid
		r.write(ims, rxq0) // unmask it
		r.write(ics, rxq0) // raise it
		n, err := waitIRQ(v.IRQEventFD(), 5*time.Second)
		if err != nil {
			return "", fmt.Errorf("%w (ICR %#x)", err, r.read(icr))
		}
		return fmt.Sprintf("eventfd count %d, %d MSI-X vectors", n, info.IRQCount), nil
	})
	g.step("e1000e hugepage DMA map and unmap", func() (string, error) {
		free0 := meminfo("HugePages_Free")
		dma := v.Bus().DMA
		small, iova1, err := dma.Alloc(4096, 4096)
		if err != nil {
			return "", err
		}
		big, iova2, err := dma.Alloc(3<<20, 2<<20)
		if err != nil {
			return "", err
		}
		for _, iova := range []uint64{iova1, iova2} {
			if iova < 1<<20 {
				return "", fmt.Errorf("IOVA %#x below 1 MiB", iova)
			}
			in := false
			for _, rg := range info.IOVARanges {
				in = in || (iova >= rg[0] && iova <= rg[1])
			}
			if !in {
				return "", fmt.Errorf("IOVA %#x outside the IOMMU's ranges", iova)
			}
		}
		small[0], big[len(big)-1] = 1, 1
		used := free0 - meminfo("HugePages_Free")
		if err := dma.Free(iova2); err != nil {
			return "", err
		}
		afterBig := free0 - meminfo("HugePages_Free")
		if err := dma.Free(iova1); err != nil {
			return "", err
		}
		if used != 3 || afterBig != 1 {
			return "", fmt.Errorf("hugepages in use: %d with both allocations (want 3), %d after freeing the 4 MiB one (want 1)", used, afterBig)
		}
		return fmt.Sprintf("4 KiB at IOVA %#x, 3 MiB at %#x, %d hugepages pinned then released", iova1, iova2, used), nil
	})
	g.step("e1000e quiesce and Close", func() (string, error) {
		quiesceE1000e(v)
		free0 := meminfo("HugePages_Free")
		if err := v.Close(); err != nil {
			return "", err
		}
		if got := meminfo("HugePages_Free"); got != free0+1 {
			return "", fmt.Errorf("HugePages_Free %d after Close, want %d (the block kept for small allocations)", got, free0+1)
		}
		return "all VFIO fds closed, hugepages returned", noLeak()
	})
}

// quiesceE1000e masks every interrupt cause and clears bus mastering before
// Close: QEMU 7.2's e1000e asserts if a throttling timer fires after MSI-X
// is disabled.
func quiesceE1000e(v *mlx5.VFIO) {
	r := regs{v.Bus().MMIO}
	r.write(0x000D8, 0xFFFFFFFF) // IMC
	r.read(0x000C0)              // ICR, clear on read
	if cmd, err := v.ReadConfig16(0x04); err == nil {
		v.WriteConfig16(0x04, cmd&^0x4)
	}
}

// edu registers (QEMU docs/specs/edu.rst).
const (
	eduID        = 0x00
	eduLive      = 0x04
	eduIRQStatus = 0x24
	eduIRQAck    = 0x64
	eduDMASrc    = 0x80
	eduDMADst    = 0x88
	eduDMACount  = 0x90
	eduDMACmd    = 0x98
	eduDMABuf    = 0x40000 // the device's 4 KiB buffer
	eduDMAStart  = 1
	eduDMAToRAM  = 2
	eduDMAIRQ    = 4
	eduIRQDMA    = 0x100
	// QEMU 7.2's edu rejects (aborts the emulator on) a transfer that ends
	// exactly at its buffer's end; half the buffer stays clear of that.
	eduDMALen = 2048
)

func (g *guest) eduDMA() {
	var v *mlx5.VFIO
	if !g.step("edu OpenVFIO", func() (string, error) {
		var err error
		v, err = mlx5.OpenVFIO(mlx5.DefaultPaths, edu, hugepages)
		if err != nil {
			return "", err
		}
		i := v.Info()
		return fmt.Sprintf("group %s, %s, BAR0 %d bytes, vector 0 on %s", i.Group, i.IOMMU, i.BAR0Size, i.IRQ), nil
	}) {
		return
	}
	defer func() {
		g.step("edu Close", func() (string, error) {
			if err := v.Close(); err != nil {
				return "", err
			}
			return "", noLeak()
		})
	}()
	r := regs{v.Bus().MMIO}
	g.step("edu MMIO identification and liveness", func() (string, error) {
		id := r.read(eduID)
		if id&0xFF != 0xed {
			return "", fmt.Errorf("identification register %#x, want 0x..ed", id)
		}
		r.write(eduLive, 0x5A5AA5A5)
		if got := r.read(eduLive); got != ^uint32(0x5A5AA5A5) {
			return "", fmt.Errorf("liveness register %#x after writing 0x5a5aa5a5", got)
		}
		return fmt.Sprintf("id %#x (version %d.%d), liveness inverts", id, id>>24, id>>16&0xff), nil
	})
	g.step("edu bus master via config write", func() (string, error) { return busMaster(v) })
	g.step("edu DMA RAM -> device -> RAM with MSI on completion", func() (string, error) {
		if v.Info().IRQ != "MSI" {
			return "", fmt.Errorf("vector 0 on %q, want MSI", v.Info().IRQ)
		}
		dma := v.Bus().DMA
		src, srcIOVA, err := dma.Alloc(4096, 4096)
		if err != nil {
			return "", err
		}
		dst, dstIOVA, err := dma.Alloc(4096, 4096)
		if err != nil {
			return "", err
		}
		rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
		for i := range src[:eduDMALen] {
			src[i] = byte(rng.Uint32()) | 1 // never 0: dst starts zeroed
		}
		run := func(from, to uint64, cmd uint32) (uint64, error) {
			r.write(eduDMASrc, uint32(from))
			r.write(eduDMADst, uint32(to))
			r.write(eduDMACount, eduDMALen)
			r.write(eduDMACmd, cmd|eduDMAStart|eduDMAIRQ)
			n, err := waitIRQ(v.IRQEventFD(), 10*time.Second)
			if err != nil {
				return 0, fmt.Errorf("%w (DMA cmd %#x, IRQ status %#x)", err, r.read(eduDMACmd), r.read(eduIRQStatus))
			}
			st := r.read(eduIRQStatus)
			r.write(eduIRQAck, st)
			if st&eduIRQDMA == 0 {
				return 0, fmt.Errorf("interrupt status %#x without the DMA bit", st)
			}
			return n, nil
		}
		n1, err := run(srcIOVA, eduDMABuf, 0)
		if err != nil {
			return "", fmt.Errorf("RAM -> device: %w", err)
		}
		n2, err := run(eduDMABuf, dstIOVA, eduDMAToRAM)
		if err != nil {
			return "", fmt.Errorf("device -> RAM: %w", err)
		}
		if !bytes.Equal(src[:eduDMALen], dst[:eduDMALen]) {
			i := 0
			for src[i] == dst[i] {
				i++
			}
			return "", fmt.Errorf("byte %d differs: wrote %#x, read back %#x", i, src[i], dst[i])
		}
		if err := errors.Join(dma.Free(srcIOVA), dma.Free(dstIOVA)); err != nil {
			return "", err
		}
		return fmt.Sprintf("%d bytes from IOVA %#x back to IOVA %#x identical, MSI eventfd counts %d and %d", eduDMALen, srcIOVA, dstIOVA, n1, n2), nil
	})
}

// --- failure paths ----------------------------------------------------------

// nonViable: eduShare shares its IOMMU group with a pci-serial that the
// kernel's 8250 driver owns.
func (g *guest) nonViable() {
	g.wantErr("non-viable group: OpenVFIO refuses (Preflight)", "not viable", func() error {
		v, err := mlx5.OpenVFIO(mlx5.DefaultPaths, eduShare, hugepages)
		if err == nil {
			v.Close()
		}
		return err
	})
	g.probe("non-viable group", eduShare, "not viable", nil, nil)
	// Hide the group's other members from Preflight so the kernel's own
	// check (VFIO_GROUP_GET_STATUS) answers, after the container is open.
	grp, _ := os.Readlink(sysDev(eduShare, "iommu_group"))
	members := filepath.Join("/sys/kernel/iommu_groups", filepath.Base(grp), "devices")
	g.wantErr("non-viable group: the kernel says so after the container is open", "is not viable", func() error {
		os.MkdirAll("/run/vmtest/empty", 0o755)
		if err := unix.Mount("/run/vmtest/empty", members, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("hiding %s: %w", members, err)
		}
		defer unix.Unmount(members, 0)
		v, err := mlx5.OpenVFIO(mlx5.DefaultPaths, eduShare, hugepages)
		if err == nil {
			v.Close()
		}
		return errors.Join(err, noLeak())
	})
	g.step("non-viable group: reopenable once the other member is unbound", func() (string, error) {
		if err := os.WriteFile(sysDev(serShare, "driver/unbind"), []byte(serShare), 0); err != nil {
			return "", err
		}
		v, err := mlx5.OpenVFIO(mlx5.DefaultPaths, eduShare, hugepages)
		if err != nil {
			return "", err
		}
		id := regs{v.Bus().MMIO}.read(eduID)
		if err := v.Close(); err != nil {
			return "", err
		}
		return fmt.Sprintf("opened, edu id %#x", id), noLeak()
	})
}

// barRefused: a pci-serial's BAR0 is 8 I/O ports, which VFIO does not
// offer for mmap.
func (g *guest) barRefused() {
	for i := 1; i <= 2; i++ {
		g.wantErr(fmt.Sprintf("BAR mmap refused: OpenVFIO errors (attempt %d, group not left busy)", i), "BAR0", func() error {
			v, err := mlx5.OpenVFIO(mlx5.DefaultPaths, serial, hugepages)
			if err == nil {
				v.Close()
			}
			if err != nil && strings.Contains(err.Error(), "busy") {
				return fmt.Errorf("group left busy by the previous attempt: %w", err)
			}
			return errors.Join(err, noLeak())
		})
	}
	g.probe("BAR mmap refused", serial, "BAR0", nil, nil)
}

const nobody = 65534

// memlock: an unprivileged process (no CAP_IPC_LOCK) with RLIMIT_MEMLOCK
// at 64 KiB owning the group device, like a service user without
// LimitMEMLOCK.
func (g *guest) memlock() {
	grp, _ := os.Readlink(sysDev(e1000e, "iommu_group"))
	dev := "/dev/vfio/" + filepath.Base(grp)
	g.step("RLIMIT_MEMLOCK too low: child as uid 65534 with a 64 KiB limit", func() (string, error) {
		if err := os.Chown(dev, nobody, nobody); err != nil {
			return "", err
		}
		defer os.Chown(dev, 0, 0)
		self, _ := os.Executable()
		cmd := exec.Command(self, "lowmem", self, "memlock-child")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("child: %w", err)
		}
		return "child passed", nil
	})
	os.Chown(dev, nobody, nobody)
	g.probe("RLIMIT_MEMLOCK too low", e1000e, "RLIMIT_MEMLOCK", []string{"/vfioguest", "lowmem"},
		&syscall.Credential{Uid: nobody, Gid: nobody})
	os.Chown(dev, 0, 0)
	g.step("RLIMIT_MEMLOCK: root reopens and maps DMA afterwards", func() (string, error) {
		v, err := mlx5.OpenVFIO(mlx5.DefaultPaths, e1000e, hugepages)
		if err != nil {
			return "", err
		}
		_, iova, err := v.Bus().DMA.Alloc(4096, 4096)
		quiesceE1000e(v)
		return fmt.Sprintf("DMA at %#x", iova), errors.Join(err, v.Close(), noLeak())
	})
}

func (g *guest) memlockChild() {
	g.wantErr("memlock child: OpenVFIO with a DMA budget refuses up front (Preflight)", "RLIMIT_MEMLOCK", func() error {
		v, err := mlx5.OpenVFIO(mlx5.DefaultPaths, e1000e, hugepages)
		if err == nil {
			quiesceE1000e(v)
			v.Close()
		}
		return errors.Join(err, noLeak())
	})
	// Without a budget asked up front, the kernel's own refusal must come
	// back as an error too.
	var v *mlx5.VFIO
	if !g.step("memlock child: OpenVFIO as uid 65534 (no budget asked)", func() (string, error) {
		var err error
		v, err = mlx5.OpenVFIO(mlx5.DefaultPaths, e1000e, 0)
		return fmt.Sprintf("uid %d", os.Getuid()), err
	}) {
		return
	}
	g.wantErr("memlock child: DMA map beyond RLIMIT_MEMLOCK errors", "locked-memory", func() error {
		_, _, err := v.Bus().DMA.Alloc(4096, 4096)
		return err
	})
	g.step("memlock child: Close", func() (string, error) {
		quiesceE1000e(v)
		return "", errors.Join(v.Close(), noLeak())
	})
}

func (g *guest) noHugepages() {
	g.step("no hugepages: nr_hugepages=0", func() (string, error) { return "", setHugepages(0) })
	g.wantErr("no hugepages: OpenVFIO refuses (Preflight)", "hugepages", func() error {
		v, err := mlx5.OpenVFIO(mlx5.DefaultPaths, e1000e, hugepages)
		if err == nil {
			v.Close()
		}
		return err
	})
	g.probe("no hugepages", e1000e, "hugepages", nil, nil)
	g.wantErr("no hugepages: DMA allocation errors (no budget asked up front)", "hugepages", func() error {
		v, err := mlx5.OpenVFIO(mlx5.DefaultPaths, e1000e, 0)
		if err != nil {
			return fmt.Errorf("OpenVFIO without a budget: %w", err)
		}
		_, _, aerr := v.Bus().DMA.Alloc(4096, 4096)
		quiesceE1000e(v)
		return errors.Join(aerr, v.Close(), noLeak())
	})
	g.step("no hugepages: reopen and map once 16 are reserved", func() (string, error) {
		if err := setHugepages(16); err != nil {
			return "", err
		}
		v, err := mlx5.OpenVFIO(mlx5.DefaultPaths, e1000e, hugepages)
		if err != nil {
			return "", err
		}
		_, iova, err := v.Bus().DMA.Alloc(4096, 4096)
		quiesceE1000e(v)
		return fmt.Sprintf("DMA at %#x", iova), errors.Join(err, v.Close(), noLeak())
	})
}

// --- the guest without interrupt remapping ----------------------------------

func (g *guest) noIntremap() {
	g.bind(e1000e)
	g.fakeConnectX(e1000e)
	g.step("reserve 16 hugepages", func() (string, error) { return "", setHugepages(16) })
	for i := 1; i <= 2; i++ {
		g.wantErr(fmt.Sprintf("SET_IOMMU refused without interrupt remapping (attempt %d)", i), "VFIO_SET_IOMMU", func() error {
			v, err := mlx5.OpenVFIO(mlx5.DefaultPaths, e1000e, hugepages)
			if err == nil {
				v.Close()
			}
			return errors.Join(err, noLeak())
		})
	}
	g.probe("SET_IOMMU refused", e1000e, "VFIO_SET_IOMMU", nil, nil)
	g.step("kernel log names the cause", func() (string, error) {
		out, _ := exec.Command("/bin/dmesg").Output()
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "interrupt remapping") {
				return strings.TrimSpace(l), nil
			}
		}
		return "", errors.New("no line about interrupt remapping in dmesg")
	})
}
