package vmtest

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// Pins: the kernels and emulator the guests and their module lists are
// made for. Debian's security updates move a kernel's ABI number (6.1.0-N,
// 6.12.N+deb12), so each pin is a metapackage and a series; the exact
// version keys the cache.
const (
	QEMUSeries = "7.2." // bookworm's qemu-system-x86 1:7.2+dfsg
	CacheRoot  = "/var/cache/ovfwd-vmtest"
)

// KernelPin names a Debian kernel package through the metapackage that
// depends on its newest build.
type KernelPin struct {
	Meta    string         // the metapackage: linux-image-amd64
	Image   *regexp.Regexp // the package Meta must depend on; group 1 is uname -r
	Suffix  string         // added to that name for the package downloaded (its -unsigned build: same kernel, no signature to carry)
	Series  string         // the version's required prefix
	Modules []string       // the modules the guests load, in dependency order (paths in lib/modules/VERSION/kernel)
}

// Modules are the kernel modules the guests load, in dependency order
// (paths as in 6.1's lib/modules/VERSION/kernel tree).
var (
	VFIOModules = []string{
		"virt/lib/irqbypass.ko",
		"drivers/vfio/vfio.ko",
		"drivers/vfio/vfio_iommu_type1.ko",
		"drivers/vfio/vfio_virqfd.ko",
		"drivers/vfio/pci/vfio-pci-core.ko",
		"drivers/vfio/pci/vfio-pci.ko",
	}
	ApplianceModules = []string{
		"drivers/net/veth.ko",
		"drivers/net/tun.ko",
	}
	// VirtioModules are what the 6.12 guest loads: virtio_net and what it
	// needs, veth and tun for its hosts and the VPN client.
	VirtioModules = []string{
		"net/core/failover.ko",
		"drivers/net/net_failover.ko",
		"drivers/net/virtio_net.ko",
		"drivers/net/veth.ko",
		"drivers/net/tun.ko",
	}
)

var (
	// Kernel61 is bookworm's own kernel (linux-image-6.1.0-N-amd64).
	Kernel61 = KernelPin{
		Meta:    "linux-image-amd64",
		Image:   regexp.MustCompile(`^linux-image-(6\.1\.0-[0-9]+-amd64)$`),
		Series:  "6.1.",
		Modules: append(append([]string{}, VFIOModules...), ApplianceModules...),
	}
	// Kernel612 is bookworm-security's 6.12 cloud kernel: the one whose
	// virtio_net has AF_XDP zero-copy (drivers/net/virtio_net.c
	// virtnet_xsk_pool_enable).
	Kernel612 = KernelPin{
		Meta:    "linux-image-6.12-cloud-amd64",
		Image:   regexp.MustCompile(`^linux-image-(6\.12\.[0-9]+\+deb12-cloud-amd64)$`),
		Suffix:  "-unsigned",
		Series:  "6.12.",
		Modules: VirtioModules,
	}
)

// Kernel is an unpacked kernel package in the cache.
type Kernel struct {
	Pkg, PkgVersion string // linux-image-6.1.0-57-amd64, 6.1.192-3
	Release         string // uname -r: 6.1.0-57-amd64
	Dir             string // cache directory
}

// Vmlinuz is the kernel image.
func (k *Kernel) Vmlinuz() string { return filepath.Join(k.Dir, "vmlinuz") }

// Module is the path of a module from the lists above.
func (k *Kernel) Module(rel string) string { return filepath.Join(k.Dir, "modules", rel) }

// aptOut runs an apt command; if its package lists are empty it runs
// `apt-get update` once and tries again.
func aptOut(args ...string) (string, error) {
	out, err := exec.Command(args[0], args[1:]...).Output()
	if err == nil && len(strings.TrimSpace(string(out))) > 0 {
		return string(out), nil
	}
	if uerr := exec.Command("apt-get", "update", "-qq").Run(); uerr != nil {
		return "", fmt.Errorf("%s: %v; apt-get update: %v", strings.Join(args, " "), err, uerr)
	}
	out, err = exec.Command(args[0], args[1:]...).Output()
	if err != nil {
		return "", fmt.Errorf("%s: %v", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// PkgVersions are the candidate versions apt would install of pkgs, in
// one apt-cache call.
func PkgVersions(pkgs ...string) (map[string]string, error) {
	out, err := aptOut(append([]string{"apt-cache", "show", "--no-all-versions"}, pkgs...)...)
	if err != nil {
		return nil, err
	}
	vs := map[string]string{}
	var pkg string
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "Package: "); ok {
			pkg = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(l, "Version: "); ok && vs[pkg] == "" {
			vs[pkg] = strings.TrimSpace(v)
		}
	}
	for _, p := range pkgs {
		if vs[p] == "" {
			return nil, fmt.Errorf("apt-cache show: no version of %s", p)
		}
	}
	return vs, nil
}

var kernels struct {
	sync.Mutex
	k map[string]*Kernel
}

// GetKernel returns the 6.1 kernel (Kernel61).
func GetKernel() (*Kernel, error) { return GetPinnedKernel(Kernel61) }

// GetPinnedKernel returns pin's kernel, downloading and unpacking it into
// the cache the first time.
func GetPinnedKernel(pin KernelPin) (*Kernel, error) {
	kernels.Lock()
	defer kernels.Unlock()
	if k := kernels.k[pin.Meta]; k != nil {
		return k, nil
	}
	deps, err := aptOut("apt-cache", "depends", pin.Meta)
	if err != nil {
		return nil, err
	}
	k := &Kernel{}
	for _, l := range strings.Split(deps, "\n") {
		f := strings.Fields(l)
		if len(f) == 2 && f[0] == "Depends:" && strings.HasPrefix(f[1], "linux-image-") {
			k.Pkg = f[1]
			break
		}
	}
	m := pin.Image.FindStringSubmatch(k.Pkg)
	if m == nil {
		return nil, fmt.Errorf("vmtest: %s depends on %q, not a package matching %s: the guests and their module lists are pinned to it (KernelPin in appliance/testbed/vmtest/kernel.go)", pin.Meta, k.Pkg, pin.Image)
	}
	k.Release = m[1]
	k.Pkg += pin.Suffix
	vs, err := PkgVersions(k.Pkg)
	if err != nil {
		return nil, err
	}
	k.PkgVersion = vs[k.Pkg]
	if !strings.HasPrefix(k.PkgVersion, pin.Series) {
		return nil, fmt.Errorf("vmtest: %s is version %s, the guests are pinned to %sx", k.Pkg, k.PkgVersion, pin.Series)
	}
	k.Dir = filepath.Join(CacheRoot, "kernel-"+k.Pkg+"_"+k.PkgVersion)
	if _, err := os.Stat(filepath.Join(k.Dir, "complete")); err != nil {
		if err := unpackKernel(k, pin); err != nil {
			return nil, err
		}
	}
	if kernels.k == nil {
		kernels.k = map[string]*Kernel{}
	}
	kernels.k[pin.Meta] = k
	return k, nil
}

func unpackKernel(k *Kernel, pin KernelPin) error {
	if err := os.MkdirAll(CacheRoot, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(CacheRoot, ".kernel-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	os.Chmod(tmp, 0o755) // apt-get download drops to _apt where it can
	dl := exec.Command("apt-get", "download", "-qq", k.Pkg+"="+k.PkgVersion)
	dl.Dir = tmp
	if out, err := dl.CombinedOutput(); err != nil {
		return fmt.Errorf("vmtest: apt-get download %s=%s: %v\n%s", k.Pkg, k.PkgVersion, err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(debs) != 1 {
		return fmt.Errorf("vmtest: apt-get download left %d .deb files", len(debs))
	}
	x := filepath.Join(tmp, "x")
	if out, err := exec.Command("dpkg-deb", "-x", debs[0], x).CombinedOutput(); err != nil {
		return fmt.Errorf("vmtest: dpkg-deb -x: %v\n%s", err, out)
	}
	dst := filepath.Join(tmp, "kernel")
	copies := map[string]string{
		"boot/vmlinuz-" + k.Release: "vmlinuz",
		"boot/config-" + k.Release:  "config",
	}
	for _, mod := range pin.Modules {
		copies["lib/modules/"+k.Release+"/kernel/"+mod] = "modules/" + mod
	}
	for from, to := range copies {
		err := copyFile(filepath.Join(x, from), filepath.Join(dst, to), 0o644)
		if errors.Is(err, fs.ErrNotExist) {
			// 6.12's packages compress their modules (.ko.xz); busybox's
			// insmod takes them plain.
			err = unxz(filepath.Join(x, from+".xz"), filepath.Join(dst, to))
		}
		if err != nil {
			return fmt.Errorf("vmtest: %s has no %s (the module lists are for %sx): %w", k.Pkg, from, pin.Series, err)
		}
	}
	if err := os.WriteFile(filepath.Join(dst, "complete"), []byte(k.Pkg+" "+k.PkgVersion+"\n"), 0o644); err != nil {
		return err
	}
	os.RemoveAll(k.Dir)
	return os.Rename(dst, k.Dir)
}

func unxz(from, to string) error {
	if _, err := os.Stat(from); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	cmd := exec.Command("xz", "-dc", from)
	cmd.Stdout = out
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		out.Close()
		return fmt.Errorf("xz -dc %s: %v: %s", from, err, stderr.String())
	}
	return out.Close()
}

func copyFile(from, to string, perm os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
