package vmtest

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// ImagePackages are what the appliance guest installs on top of
// `debootstrap --variant=minbase bookworm`. udev is not in minbase but is
// on every real install: without it /dev/net/tun stays root-only (0600)
// and the package's udev rule has nothing to run it. socat is the NAT
// steps' internet host: a TCP and UDP server that tells its peer's address.
var ImagePackages = []string{
	"systemd", "systemd-sysv", "udev", "iproute2", "openvpn", "iputils-ping", "kmod", "ethtool", "procps",
	"socat",
}

// Image is a cached root filesystem of the appliance guest as an
// uncompressed initramfs (systemd runs straight from it).
type Image struct {
	Key  string // what it was built from
	CPIO string
	// Built is how long building took, zero when it came from the cache.
	Built time.Duration
}

// debianMirror is the bookworm archive apt on this host uses (the guest
// image comes from the same place).
func debianMirror() (string, error) {
	if b, err := os.ReadFile("/etc/apt/sources.list.d/debian.sources"); err == nil {
		var uri string
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "URIs:"); ok {
				uri = strings.Fields(v)[0]
			}
			if v, ok := strings.CutPrefix(l, "Suites:"); ok && uri != "" {
				for _, s := range strings.Fields(v) {
					if s == "bookworm" {
						return uri, nil
					}
				}
			}
		}
	}
	if b, err := os.ReadFile("/etc/apt/sources.list"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) >= 3 && f[0] == "deb" && f[2] == "bookworm" {
				return f[1], nil
			}
		}
	}
	return "", fmt.Errorf("vmtest: no bookworm archive in /etc/apt/sources.list{,.d/debian.sources}")
}

// imageKey names the image by everything that goes into it: the versions
// apt offers of the packages (and debootstrap's), and the kernel.
func imageKey(k *Kernel) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s\n", k.Pkg, k.PkgVersion)
	pkgs := append([]string{"debootstrap"}, ImagePackages...)
	vs, err := PkgVersions(pkgs...)
	if err != nil {
		return "", err
	}
	for _, p := range pkgs {
		fmt.Fprintf(h, "%s %s\n", p, vs[p])
	}
	fmt.Fprintf(h, "%s\n", imageSetup)
	return fmt.Sprintf("%x", h.Sum(nil))[:16], nil
}

// imageSetup runs in the new root (chroot) once the packages are in.
const imageSetup = `set -e
echo vmtest > /etc/hostname
: > /etc/machine-id
depmod -a "$1"
# Nothing the test does not need: no getty to wait for, no timers.
systemctl mask getty@tty1.service serial-getty@ttyS0.service apt-daily.timer apt-daily-upgrade.timer \
	e2scrub_all.timer fstrim.timer systemd-timesyncd.service 2>/dev/null || true
rm -rf /usr/share/doc/* /usr/share/man/* /usr/share/locale/* /var/cache/apt/archives/*.deb /var/lib/apt/lists/*
`

// GetImage returns the appliance guest's root filesystem, building it with
// debootstrap the first time and whenever a package version changes.
func GetImage(k *Kernel, log io.Writer) (*Image, error) {
	key, err := imageKey(k)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(CacheRoot, "appliance-"+key)
	img := &Image{Key: key, CPIO: filepath.Join(dir, "rootfs.cpio")}
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
		return img, nil
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return nil, fmt.Errorf("vmtest: debootstrap is not installed (make deps)")
	}
	mirror, err := debianMirror()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	tmp, err := os.MkdirTemp(CacheRoot, ".appliance-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	root := filepath.Join(tmp, "root")
	run := func(name string, args ...string) error {
		cmd := exec.Command(name, args...)
		cmd.Stdout, cmd.Stderr = log, log
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("vmtest: %s %s: %w", name, strings.Join(args, " "), err)
		}
		return nil
	}
	if err := run("debootstrap", "--variant=minbase", "--include="+strings.Join(ImagePackages, ","), "bookworm", root, mirror); err != nil {
		return nil, err
	}
	for _, m := range ApplianceModules {
		if err := copyFile(k.Module(m), filepath.Join(root, "lib/modules", k.Release, "kernel", m), 0o644); err != nil {
			return nil, err
		}
	}
	if err := run("chroot", root, "/bin/sh", "-c", imageSetup, "setup", k.Release); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(tmp, "rootfs.cpio"))
	if err != nil {
		return nil, err
	}
	c := newCPIO(f)
	c.Tree(root)
	if err := c.Close(); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	os.MkdirAll(dir, 0o755)
	if err := os.Rename(filepath.Join(tmp, "rootfs.cpio"), img.CPIO); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "complete"), []byte(key+"\n"), 0o644); err != nil {
		return nil, err
	}
	img.Built = time.Since(start)
	return img, nil
}
