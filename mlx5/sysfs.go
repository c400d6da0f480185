package mlx5

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Paths are the filesystem roots the VFIO layer reads; tests point them at
// a fake tree.
type Paths struct {
	Sys  string // normally /sys
	Dev  string // normally /dev
	Proc string // normally /proc
}

// DefaultPaths are the real roots.
var DefaultPaths = Paths{Sys: "/sys", Dev: "/dev", Proc: "/proc"}

// connectXDevices are the mlx5 PCI functions (rdma-core providers/mlx5/mlx5.c
// HCA table; kernel main.c mlx5_core_pci_table marks the VFs).
var connectXDevices = map[uint16]string{
	0x1015: "ConnectX-4 Lx", 0x1016: "ConnectX-4 Lx VF", 0x1017: "ConnectX-5", 0x1018: "ConnectX-5 VF",
	0x1019: "ConnectX-5 Ex", 0x101a: "ConnectX-5 Ex VF", 0x101b: "ConnectX-6", 0x101c: "ConnectX-6 VF",
	0x101d: "ConnectX-6 Dx", 0x101e: "ConnectX VF", 0x101f: "ConnectX-6 Lx", 0x1021: "ConnectX-7",
	0x1023: "ConnectX-8", 0xa2d2: "BlueField", 0xa2d6: "BlueField-2", 0xa2dc: "BlueField-3",
}

// Function is one ConnectX PCI function found in sysfs.
type Function struct {
	Addr       string // 0000:3b:00.0
	DeviceID   uint16
	Name       string
	Driver     string // bound driver, "" if none
	IOMMUGroup string // "" if the function has no IOMMU group
}

// ListFunctions finds the ConnectX functions under paths.Sys.
func ListFunctions(paths Paths) ([]Function, error) {
	dir := filepath.Join(paths.Sys, "bus/pci/devices")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("mlx5: listing PCI devices: %w", err)
	}
	var fns []Function
	for _, e := range ents {
		f, ok, err := readFunction(paths, e.Name())
		if err != nil {
			return nil, err
		}
		if ok {
			fns = append(fns, f)
		}
	}
	sort.Slice(fns, func(i, j int) bool { return fns[i].Addr < fns[j].Addr })
	return fns, nil
}

func readHex(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(string(b)), "0x"), 16, 32)
}

// readFunction reads one PCI function; ok is false if it is not a ConnectX.
func readFunction(paths Paths, addr string) (Function, bool, error) {
	dev := filepath.Join(paths.Sys, "bus/pci/devices", addr)
	vendor, err := readHex(filepath.Join(dev, "vendor"))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Function{}, false, nil
		}
		return Function{}, false, err
	}
	id, err := readHex(filepath.Join(dev, "device"))
	if err != nil {
		return Function{}, false, err
	}
	name, known := connectXDevices[uint16(id)]
	if vendor != 0x15b3 || !known {
		return Function{}, false, nil
	}
	f := Function{Addr: addr, DeviceID: uint16(id), Name: name}
	if l, err := os.Readlink(filepath.Join(dev, "driver")); err == nil {
		f.Driver = filepath.Base(l)
	}
	if l, err := os.Readlink(filepath.Join(dev, "iommu_group")); err == nil {
		f.IOMMUGroup = filepath.Base(l)
	}
	return f, true, nil
}

// SetupProblem is one thing that keeps VFIO from using a function, with
// the exact command or setting that fixes it.
type SetupProblem struct {
	What string
	Fix  string
}

// SetupError lists every problem found, so the operator can fix them all
// in one go.
type SetupError struct {
	Addr     string
	Problems []SetupProblem
}

func (e *SetupError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mlx5: cannot use %s through VFIO:", e.Addr)
	for i, p := range e.Problems {
		fmt.Fprintf(&b, "\n  %d. %s\n     fix: %s", i+1, p.What, strings.ReplaceAll(p.Fix, "\n", "\n          "))
	}
	return b.String()
}

// Preflight checks everything VFIO needs for the function at addr and the
// hugepages for hugepages2M pages of DMA memory, and reports all problems
// with their fixes. It only reads files.
func Preflight(paths Paths, addr string, hugepages2M int) error {
	e := &SetupError{Addr: addr}
	add := func(what, fix string) { e.Problems = append(e.Problems, SetupProblem{what, fix}) }
	f, ok, err := readFunction(paths, addr)
	switch {
	case err != nil:
		return fmt.Errorf("mlx5: reading %s: %w", addr, err)
	case !ok:
		if _, err := os.Stat(filepath.Join(paths.Sys, "bus/pci/devices", addr)); err != nil {
			add("no PCI function "+addr, "check the address with `lspci -D -d 15b3:` (the form is 0000:bb:dd.f)")
		} else {
			add(addr+" is not a supported ConnectX function (vendor 15b3, mlx5 device id)", "pick a ConnectX port from `ovfwd probe`")
		}
		return e
	}
	if _, err := os.Stat(filepath.Join(paths.Dev, "vfio/vfio")); err != nil {
		p := noVFIOProblem(paths)
		add(p.What, p.Fix)
	}
	if f.IOMMUGroup == "" {
		add(addr+" has no IOMMU group: the IOMMU is off",
			"enable VT-d/AMD-Vi in the firmware setup and boot with intel_iommu=on iommu=pt (Intel) or amd_iommu=on iommu=pt (AMD)\n"+
				"on the kernel command line (e.g. GRUB_CMDLINE_LINUX in /etc/default/grub, then update-grub and reboot)")
	}
	if f.Driver != "vfio-pci" {
		var fix strings.Builder
		fix.WriteString("modprobe vfio-pci\n")
		fmt.Fprintf(&fix, "echo vfio-pci > /sys/bus/pci/devices/%s/driver_override\n", addr)
		if f.Driver != "" {
			fmt.Fprintf(&fix, "echo %s > /sys/bus/pci/devices/%s/driver/unbind\n", addr, addr)
		}
		fmt.Fprintf(&fix, "echo %s > /sys/bus/pci/drivers/vfio-pci/bind", addr)
		what := addr + " is not bound to any driver"
		if f.Driver != "" {
			what = fmt.Sprintf("%s is bound to %s, not vfio-pci (the port disappears from the kernel once rebound)", addr, f.Driver)
		}
		add(what, fix.String())
	}
	if f.IOMMUGroup != "" {
		groupDev := filepath.Join(paths.Dev, "vfio", f.IOMMUGroup)
		if _, err := os.Stat(groupDev); err != nil && f.Driver == "vfio-pci" {
			add(groupDev+" does not exist although the function is bound to vfio-pci", "check `dmesg | grep -i vfio` and that /dev is devtmpfs")
		}
		members, _ := os.ReadDir(filepath.Join(paths.Sys, "kernel/iommu_groups", f.IOMMUGroup, "devices"))
		for _, m := range members {
			if m.Name() == addr {
				continue
			}
			l, err := os.Readlink(filepath.Join(paths.Sys, "bus/pci/devices", m.Name(), "driver"))
			if err != nil {
				continue // no driver: fine
			}
			if drv := filepath.Base(l); drv != "vfio-pci" && drv != "pcieport" {
				add(fmt.Sprintf("IOMMU group %s also contains %s bound to %s: the group is not viable", f.IOMMUGroup, m.Name(), drv),
					fmt.Sprintf("bind %s to vfio-pci too (same commands as above with its address), or move the card to a slot with its own group", m.Name()))
			}
		}
	}
	if hugepages2M > 0 {
		free, err := readDec(filepath.Join(paths.Sys, "kernel/mm/hugepages/hugepages-2048kB/free_hugepages"))
		if err != nil || free < hugepages2M {
			total, _ := readDec(filepath.Join(paths.Proc, "sys/vm/nr_hugepages"))
			add(fmt.Sprintf("%d free 2 MiB hugepages, %d needed for queue and packet memory", free, hugepages2M),
				fmt.Sprintf("echo %d > /proc/sys/vm/nr_hugepages   (or vm.nr_hugepages in /etc/sysctl.d, or hugepages=%d on the kernel command line)", total+hugepages2M-free, total+hugepages2M-free))
		}
	}
	if hugepages2M > 0 {
		if p, ok := memlockProblem(paths, uint64(hugepages2M)<<21); ok {
			add(p.What, p.Fix)
		}
	}
	if len(e.Problems) > 0 {
		return e
	}
	return nil
}

// capIPCLock is CAP_IPC_LOCK's bit (include/uapi/linux/capability.h).
const capIPCLock = 14

// memlockProblem reports a locked-memory limit too small for need bytes of
// DMA memory. vfio_iommu_type1 pins every mapped page and charges it to
// RLIMIT_MEMLOCK unless the process has CAP_IPC_LOCK
// (drivers/vfio/vfio_iommu_type1.c vfio_pin_pages_remote), so without the
// capability the first large VFIO_IOMMU_MAP_DMA fails with ENOMEM deep in
// bring-up; this says so up front.
func memlockProblem(paths Paths, need uint64) (SetupProblem, bool) {
	if status, err := os.ReadFile(filepath.Join(paths.Proc, "self/status")); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
				if eff, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && eff&(1<<capIPCLock) != 0 {
					return SetupProblem{}, false
				}
			}
		}
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim); err != nil || lim.Cur == unix.RLIM_INFINITY || lim.Cur >= need {
		return SetupProblem{}, false
	}
	return SetupProblem{
		fmt.Sprintf("locked-memory limit (RLIMIT_MEMLOCK) is %d KiB and the process has no CAP_IPC_LOCK; DMA memory needs %d KiB pinned", lim.Cur>>10, need>>10),
		"run with CAP_IPC_LOCK (the packaged unit grants it), or raise the limit: LimitMEMLOCK=infinity in the unit, or `ulimit -l unlimited` / /etc/security/limits.conf",
	}, true
}

func readDec(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
