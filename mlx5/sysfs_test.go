package mlx5_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ovfwd/ovfwd/mlx5"
	"github.com/ovfwd/ovfwd/mlx5/model/sim"
)

const addr = "0000:3b:00.0"

type fakeHost struct {
	t     *testing.T
	paths mlx5.Paths
}

func newFakeHost(t *testing.T) *fakeHost {
	root := t.TempDir()
	h := &fakeHost{t: t, paths: mlx5.Paths{Sys: filepath.Join(root, "sys"), Dev: filepath.Join(root, "dev"), Proc: filepath.Join(root, "proc")}}
	h.write("sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", "0\n")
	h.write("proc/sys/vm/nr_hugepages", "0\n")
	// CAP_IPC_LOCK, as the packaged unit grants: no locked-memory problem
	// unless a test takes it away.
	h.write("proc/self/status", "Name:\tovfwd\nCapEff:\t0000000000004000\n")
	h.mkdir("dev")
	h.mkdir("sys/bus/pci/drivers/vfio-pci")
	h.mkdir("sys/bus/pci/drivers/mlx5_core")
	return h
}

func (h *fakeHost) path(rel string) string { return filepath.Join(filepath.Dir(h.paths.Sys), rel) }

func (h *fakeHost) write(rel, content string) {
	h.t.Helper()
	p := h.path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

func (h *fakeHost) mkdir(rel string) {
	if err := os.MkdirAll(h.path(rel), 0o755); err != nil {
		h.t.Fatal(err)
	}
}

func (h *fakeHost) link(rel, target string) {
	h.t.Helper()
	p := h.path(rel)
	os.MkdirAll(filepath.Dir(p), 0o755)
	os.Remove(p)
	if err := os.Symlink(target, p); err != nil {
		h.t.Fatal(err)
	}
}

// function adds a PCI function; driver and group may be empty.
func (h *fakeHost) function(a, vendor, device, driver, group string) {
	dev := "sys/bus/pci/devices/" + a
	h.write(dev+"/vendor", vendor+"\n")
	h.write(dev+"/device", device+"\n")
	if driver != "" {
		h.link(dev+"/driver", "../../../bus/pci/drivers/"+driver)
	}
	if group != "" {
		h.link(dev+"/iommu_group", "../../../kernel/iommu_groups/"+group)
		h.link("sys/kernel/iommu_groups/"+group+"/devices/"+a, "../../../../bus/pci/devices/"+a)
	}
}

func problems(t *testing.T, err error) string {
	t.Helper()
	var se *mlx5.SetupError
	if !errors.As(err, &se) {
		t.Fatalf("got %v, want a SetupError", err)
	}
	return err.Error()
}

// This machine's situation: no VFIO in the kernel, the port on mlx5_core,
// no hugepages. Every fix must be spelled out for that address.
func TestPreflightNoVFIOBoundToMlx5Core(t *testing.T) {
	h := newFakeHost(t)
	h.function(addr, "0x15b3", "0x101d", "mlx5_core", "12")
	msg := problems(t, mlx5.Preflight(h.paths, addr, 8))
	for _, want := range []string{
		"/dev/vfio/vfio does not exist", "modprobe vfio-pci", "CONFIG_VFIO",
		"bound to mlx5_core", "echo vfio-pci > /sys/bus/pci/devices/0000:3b:00.0/driver_override",
		"echo 0000:3b:00.0 > /sys/bus/pci/devices/0000:3b:00.0/driver/unbind",
		"echo 0000:3b:00.0 > /sys/bus/pci/drivers/vfio-pci/bind",
		"0 free 2 MiB hugepages, 8 needed", "echo 8 > /proc/sys/vm/nr_hugepages",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "intel_iommu") {
		t.Errorf("IOMMU fix suggested although the group exists:\n%s", msg)
	}
}

func TestPreflightNoIOMMUGroup(t *testing.T) {
	h := newFakeHost(t)
	h.function(addr, "0x15b3", "0x1017", "", "")
	h.write("dev/vfio/vfio", "")
	h.write("sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", "64\n")
	msg := problems(t, mlx5.Preflight(h.paths, addr, 8))
	for _, want := range []string{"no IOMMU group", "intel_iommu=on", "amd_iommu=on", "not bound to any driver"} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "/unbind") || strings.Contains(msg, "hugepages") {
		t.Errorf("spurious fixes:\n%s", msg)
	}
}

func TestPreflightGroupNotViable(t *testing.T) {
	h := newFakeHost(t)
	h.function(addr, "0x15b3", "0x1017", "vfio-pci", "7")
	h.function("0000:3b:00.1", "0x15b3", "0x1017", "mlx5_core", "7")
	h.write("dev/vfio/vfio", "")
	h.write("dev/vfio/7", "")
	h.write("sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", "64\n")
	msg := problems(t, mlx5.Preflight(h.paths, addr, 8))
	if !strings.Contains(msg, "0000:3b:00.1 bound to mlx5_core") || !strings.Contains(msg, "not viable") {
		t.Errorf("group problem not reported:\n%s", msg)
	}
}

func TestPreflightReady(t *testing.T) {
	h := newFakeHost(t)
	h.function(addr, "0x15b3", "0x1017", "vfio-pci", "7")
	h.write("dev/vfio/vfio", "")
	h.write("dev/vfio/7", "")
	h.write("sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", "64\n")
	if err := mlx5.Preflight(h.paths, addr, 8); err != nil {
		t.Fatalf("ready host: %v", err)
	}
}

func TestPreflightNotConnectX(t *testing.T) {
	h := newFakeHost(t)
	h.function("0000:00:03.0", "0x1af4", "0x1041", "virtio-pci", "")
	msg := problems(t, mlx5.Preflight(h.paths, "0000:00:03.0", 0))
	if !strings.Contains(msg, "not a supported ConnectX") {
		t.Errorf("%s", msg)
	}
	msg = problems(t, mlx5.Preflight(h.paths, "0000:09:00.0", 0))
	if !strings.Contains(msg, "no PCI function 0000:09:00.0") {
		t.Errorf("%s", msg)
	}
}

func TestProbeListsAndExplains(t *testing.T) {
	h := newFakeHost(t)
	h.function(addr, "0x15b3", "0x101d", "mlx5_core", "12")
	h.function("0000:3b:00.1", "0x15b3", "0x101d", "", "13")
	h.function("0000:00:03.0", "0x1af4", "0x1041", "virtio-pci", "")
	var out bytes.Buffer
	if err := mlx5.ProbePaths(&out, h.paths, "", fastOptions()); err != nil {
		t.Fatalf("listing only: %v", err)
	}
	s := out.String()
	for _, want := range []string{"0000:3b:00.0", "ConnectX-6 Dx [101d]", "mlx5_core", "12", "(none)", "VFIO is not available", "probe --pci"} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %q in:\n%s", want, s)
		}
	}
	if strings.Contains(s, "0000:00:03.0") {
		t.Errorf("virtio device listed:\n%s", s)
	}
	out.Reset()
	err := mlx5.ProbePaths(&out, h.paths, addr, fastOptions())
	if err == nil || !strings.Contains(out.String(), "driver_override") {
		t.Fatalf("probe --pci on an unusable function: %v\n%s", err, out.String())
	}
}

func TestDescribeOnModel(t *testing.T) {
	bus, dev, mem := newModel(sim.DefaultConfig())
	var out bytes.Buffer
	if err := mlx5.Describe(&out, "sim", bus, fastOptions()); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"firmware 22.39.1002", "MAC 02:00:5e:10:00:01", "link up", "2^3..2^16 strides", "basic, enhanced", "enhanced MPWQE true", "minimum inline none"} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %q in:\n%s", want, s)
		}
	}
	assertClean(t, dev, mem)
}

// With /proc/config.gz saying CONFIG_VFIO is not set (this machine), the
// fix is a different kernel, not modprobe.
func TestPreflightKernelWithoutVFIO(t *testing.T) {
	h := newFakeHost(t)
	h.function(addr, "0x15b3", "0x101d", "mlx5_core", "12")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("CONFIG_IOMMU_SUPPORT=y\n# CONFIG_VFIO is not set\n"))
	zw.Close()
	h.write("proc/config.gz", gz.String())
	msg := problems(t, mlx5.Preflight(h.paths, addr, 0))
	if !strings.Contains(msg, "built without VFIO (CONFIG_VFIO is not set") || !strings.Contains(msg, "CONFIG_VFIO_PCI=m") {
		t.Errorf("kernel config not used:\n%s", msg)
	}
	var out bytes.Buffer
	mlx5.ProbePaths(&out, h.paths, "", fastOptions())
	if !strings.Contains(out.String(), "built without VFIO") {
		t.Errorf("probe output:\n%s", out.String())
	}
}

// Without CAP_IPC_LOCK a locked-memory limit below the DMA budget is named
// with its fix before any VFIO call; with the capability the limit does not
// matter (vfio_iommu_type1 does not charge it).
func TestPreflightLockedMemoryLimit(t *testing.T) {
	var saved unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &saved); err != nil {
		t.Fatal(err)
	}
	low := unix.Rlimit{Cur: 64 << 10, Max: saved.Max}
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &low); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_MEMLOCK, &saved) })

	h := newFakeHost(t)
	h.function(addr, "0x15b3", "0x1017", "vfio-pci", "12")
	h.write("dev/vfio/vfio", "")
	h.write("dev/vfio/12", "")
	h.write("sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", "64\n")
	if err := mlx5.Preflight(h.paths, addr, 8); err != nil {
		t.Fatalf("with CAP_IPC_LOCK: %v", err)
	}
	h.write("proc/self/status", "Name:\tovfwd\nCapEff:\t0000000000003000\n")
	msg := problems(t, mlx5.Preflight(h.paths, addr, 8))
	for _, want := range []string{"RLIMIT_MEMLOCK) is 64 KiB", "needs 16384 KiB", "CAP_IPC_LOCK", "LimitMEMLOCK=infinity"} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in:\n%s", want, msg)
		}
	}
}
