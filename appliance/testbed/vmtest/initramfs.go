package vmtest

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Busybox is the static busybox the small guests run on (Debian's
// busybox-static).
const Busybox = "/bin/busybox"

func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("vmtest: %s: %w (install busybox-static: make deps)", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("vmtest: %s is dynamically linked; the guest has no libc (install busybox-static)", path)
		}
	}
	return nil
}

// BuildStatic builds a Go package of this module as a static binary
// (CGO_ENABLED=0) for the guests.
func BuildStatic(pkg, out string) error {
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("vmtest: go build %s: %v\n%s", pkg, err, b)
	}
	return checkStatic(out)
}

// BusyboxInitramfs writes an initramfs with busybox, the kernel modules
// (loaded in order by /init), the given files (guest path -> host path)
// and /init running script after the common setup; the script's output goes
// to ttyS1 and the guest powers off after it.
func BusyboxInitramfs(out string, k *Kernel, modules []string, files map[string]string, script string) error {
	if err := checkStatic(Busybox); err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	c := newCPIO(f)
	for _, d := range []string{"bin", "sbin", "usr", "usr/bin", "usr/sbin", "proc", "sys", "dev", "run", "tmp", "etc", "lib", "lib/modules"} {
		c.Dir(d, 0o755)
	}
	c.Copy("bin/busybox", Busybox, 0o755)
	var ins strings.Builder
	for _, m := range modules {
		name := "lib/modules/" + filepath.Base(m)
		c.Copy(name, k.Module(m), 0o644)
		fmt.Fprintf(&ins, "insmod /%s || echo 'STEP insmod %s: FAIL'\n", name, filepath.Base(m))
	}
	for guest, host := range files {
		c.Copy(strings.TrimPrefix(guest, "/"), host, 0o755)
	}
	c.File("init", 0o755, []byte(`#!/bin/busybox sh
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /run
exec >/dev/ttyS1 2>&1
`+ins.String()+`echo "VMTEST start uptime $(cut -d' ' -f1 /proc/uptime)"
`+script+`
echo "VMTEST end uptime $(cut -d' ' -f1 /proc/uptime)"
poweroff -f
`))
	return c.Close()
}
