package vmtest

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// Pins: the kernel and emulator the guests and their module lists are made
// for. Debian's security updates move the kernel ABI number (6.1.0-N), so
// the pin is the series; the exact version keys the cache.
const (
	KernelSeries = "6.1." // bookworm's linux-image-6.1.0-N-amd64, version 6.1.x-y
	QEMUSeries   = "7.2." // bookworm's qemu-system-x86 1:7.2+dfsg
	CacheRoot    = "/var/cache/ovfwd-vmtest"
	kernelMeta   = "linux-image-amd64"
)

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

var kernelPkgRE = regexp.MustCompile(`^linux-image-(6\.1\.0-[0-9]+-amd64)$`)

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

var kernelOnce struct {
	sync.Mutex
	k *Kernel
}

// GetKernel returns the pinned kernel, downloading and unpacking it into
// the cache the first time.
func GetKernel() (*Kernel, error) {
	kernelOnce.Lock()
	defer kernelOnce.Unlock()
	if kernelOnce.k != nil {
		return kernelOnce.k, nil
	}
	deps, err := aptOut("apt-cache", "depends", kernelMeta)
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
	m := kernelPkgRE.FindStringSubmatch(k.Pkg)
	if m == nil {
		return nil, fmt.Errorf("vmtest: %s depends on %q, not a linux-image-6.1.0-N-amd64: the guests and their module lists are pinned to Debian bookworm's 6.1 kernel (KernelSeries in appliance/testbed/vmtest/kernel.go)", kernelMeta, k.Pkg)
	}
	k.Release = m[1]
	vs, err := PkgVersions(k.Pkg)
	if err != nil {
		return nil, err
	}
	k.PkgVersion = vs[k.Pkg]
	if !strings.HasPrefix(k.PkgVersion, KernelSeries) {
		return nil, fmt.Errorf("vmtest: %s is version %s, the guests are pinned to %sx", k.Pkg, k.PkgVersion, KernelSeries)
	}
	k.Dir = filepath.Join(CacheRoot, "kernel-"+k.Pkg+"_"+k.PkgVersion)
	if _, err := os.Stat(filepath.Join(k.Dir, "complete")); err == nil {
		kernelOnce.k = k
		return k, nil
	}
	if err := unpackKernel(k); err != nil {
		return nil, err
	}
	kernelOnce.k = k
	return k, nil
}

func unpackKernel(k *Kernel) error {
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
	for _, mod := range append(append([]string{}, VFIOModules...), ApplianceModules...) {
		copies["lib/modules/"+k.Release+"/kernel/"+mod] = "modules/" + mod
	}
	for from, to := range copies {
		if err := copyFile(filepath.Join(x, from), filepath.Join(dst, to), 0o644); err != nil {
			return fmt.Errorf("vmtest: %s has no %s (the module lists are for %sx): %w", k.Pkg, from, KernelSeries, err)
		}
	}
	if err := os.WriteFile(filepath.Join(dst, "complete"), []byte(k.Pkg+" "+k.PkgVersion+"\n"), 0o644); err != nil {
		return err
	}
	os.RemoveAll(k.Dir)
	return os.Rename(dst, k.Dir)
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
