package vmtest

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
)

// The VFIO guest's devices: vfioguest/main.go names them by these
// addresses. The pci-bridge's second function shares the bridge's IOMMU
// group with the edu behind it and is claimed by the kernel's built-in 8250
// driver, which makes that group non-viable.
var vfioDevices = []string{
	"e1000e,addr=03.0",
	"edu,addr=04.0",
	"pci-serial,addr=05.0",
	"pci-bridge,id=br1,chassis_nr=1,addr=06.0",
	"edu,bus=br1,addr=01.0",
	"pci-serial,bus=br1,addr=02.0",
}

// Every step the guest must report as passed, in the order it runs them.
var (
	vfioSteps = []string{
		"bind 0000:00:03.0 to vfio-pci",
		"bind 0000:00:04.0 to vfio-pci",
		"substitute 15b3:1017 for the sysfs IDs of 0000:00:03.0",
		"reserve 16 hugepages",
		"e1000e OpenVFIO",
		"e1000e container, group and device fds",
		"e1000e VFIO API version, type1v2 IOMMU, SET_IOMMU",
		"e1000e IOMMU info and IOVA ranges",
		"e1000e BAR0 mmap",
		"e1000e config region",
		"e1000e BAR0 register read/write",
		"e1000e bus master via config write",
		"e1000e MSI-X eventfd fires on a raised interrupt",
		"e1000e hugepage DMA map and unmap",
		"e1000e quiesce and Close",
		"e1000e reopen after Close",
		"edu OpenVFIO",
		"edu MMIO identification and liveness",
		"edu bus master via config write",
		"edu DMA RAM -> device -> RAM with MSI on completion",
		"edu Close",
		"edu reopen after Close",
		"non-viable group: OpenVFIO refuses (Preflight)",
		"probe non-viable group",
		"non-viable group: the kernel says so after the container is open",
		"non-viable group: reopenable once the other member is unbound",
		"BAR mmap refused: OpenVFIO errors (attempt 1, group not left busy)",
		"BAR mmap refused: OpenVFIO errors (attempt 2, group not left busy)",
		"probe BAR mmap refused",
		"memlock child: OpenVFIO with a DMA budget refuses up front (Preflight)",
		"memlock child: OpenVFIO as uid 65534 (no budget asked)",
		"memlock child: DMA map beyond RLIMIT_MEMLOCK errors",
		"memlock child: Close",
		"RLIMIT_MEMLOCK too low: child as uid 65534 with a 64 KiB limit",
		"probe RLIMIT_MEMLOCK too low",
		"RLIMIT_MEMLOCK: root reopens and maps DMA afterwards",
		"no hugepages: nr_hugepages=0",
		"no hugepages: OpenVFIO refuses (Preflight)",
		"probe no hugepages",
		"no hugepages: DMA allocation errors (no budget asked up front)",
		"no hugepages: reopen and map once 16 are reserved",
	}
	noIntremapSteps = []string{
		"bind 0000:00:03.0 to vfio-pci",
		"SET_IOMMU refused without interrupt remapping (attempt 1)",
		"SET_IOMMU refused without interrupt remapping (attempt 2)",
		"probe SET_IOMMU refused",
		"kernel log names the cause",
	}
)

// vfioInitramfs builds the guest program, a static ovfwd for `ovfwd probe`
// and the initramfs that runs them.
func vfioInitramfs(t *testing.T, k *Kernel) string {
	t.Helper()
	dir := t.TempDir()
	guest, ovfwd := filepath.Join(dir, "vfioguest"), filepath.Join(dir, "ovfwd")
	start := time.Now()
	if err := BuildStatic("github.com/ovfwd/ovfwd/appliance/testbed/vmtest/vfioguest", guest); err != nil {
		t.Fatal(err)
	}
	if err := BuildStatic("github.com/ovfwd/ovfwd/cmd/ovfwd", ovfwd); err != nil {
		t.Fatal(err)
	}
	initrd := filepath.Join(dir, "initrd")
	script := `mode=$(sed -n 's/.*vmtest.mode=\([a-z]*\).*/\1/p' /proc/cmdline)
/vfioguest $mode; echo "VMTEST exit $?"`
	if err := BusyboxInitramfs(initrd, k, VFIOModules, map[string]string{"/vfioguest": guest, "/bin/ovfwd": ovfwd}, script); err != nil {
		t.Fatal(err)
	}
	t.Logf("guest binaries and initramfs built in %v", time.Since(start).Round(time.Millisecond))
	return initrd
}

// TestVFIOGuest runs the VFIO layer against Linux 6.1's vfio-pci and an
// emulated Intel IOMMU: twice, with and without interrupt remapping.
func TestVFIOGuest(t *testing.T) {
	nstest.RequireRoot(t)
	qv, err := QEMUVersion()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	k, err := GetKernel()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s; kernel %s %s from %s (%v)", qv, k.Pkg, k.PkgVersion, k.Dir, time.Since(start).Round(time.Millisecond))
	initrd := vfioInitramfs(t, k)

	t.Run("intremap", func(t *testing.T) {
		r := bootGuest(t, Machine{Kernel: k, Initrd: initrd, IntRemap: true, Append: "vmtest.mode=full", Devices: vfioDevices, MemMB: 512, Timeout: 8 * time.Minute})
		checkSteps(t, r, vfioSteps)
	})
	t.Run("nointremap", func(t *testing.T) {
		r := bootGuest(t, Machine{Kernel: k, Initrd: initrd, IntRemap: false, Append: "vmtest.mode=nointremap", Devices: vfioDevices[:1], MemMB: 512, Timeout: 8 * time.Minute})
		checkSteps(t, r, noIntremapSteps)
	})
}

func bootGuest(t *testing.T, m Machine) Result {
	t.Helper()
	r, err := Boot(context.Background(), t.TempDir(), m)
	t.Logf("guest ran %v; %s", r.Elapsed.Round(time.Millisecond), uptimes(r.Output))
	if err != nil {
		dumpGuest(t, r)
		t.Fatal(err)
	}
	return r
}

// uptimes reports the guest's own clock at the test's start and end.
func uptimes(out string) string {
	var parts []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "VMTEST start uptime") || strings.HasPrefix(l, "VMTEST end uptime") {
			parts = append(parts, strings.TrimPrefix(l, "VMTEST "))
		}
	}
	return strings.Join(parts, ", ")
}

func dumpGuest(t *testing.T, r Result) {
	t.Helper()
	con := r.Console
	if len(con) > 6000 {
		con = "...\n" + con[len(con)-6000:]
	}
	t.Logf("guest console (ttyS0):\n%s", con)
	t.Logf("guest report (ttyS1):\n%s", r.Output)
}

// checkSteps prints every line the guest reported and fails on a missing
// or failed step, or a report that did not reach its end.
func checkSteps(t *testing.T, r Result, want []string) {
	t.Helper()
	steps, _ := ParseSteps(r.Output)
	t.Logf("guest report:\n%s", r.Output)
	got := map[string]Step{}
	bad := false
	for _, s := range steps {
		got[s.Name] = s
		if !s.OK {
			t.Errorf("guest step failed: %s: %s", s.Name, s.Detail)
			bad = true
		}
	}
	for _, w := range want {
		if _, ok := got[w]; !ok {
			t.Errorf("guest never ran step %q", w)
			bad = true
		}
	}
	if !strings.Contains(r.Output, "VMTEST done fails=0") {
		t.Errorf("the guest program did not finish cleanly")
		bad = true
	}
	if bad {
		dumpGuest(t, r)
	}
}
