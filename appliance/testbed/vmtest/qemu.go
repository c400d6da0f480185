package vmtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// Machine is one guest boot: q35 with an emulated Intel IOMMU, TCG.
type Machine struct {
	Kernel   *Kernel
	Initrd   string
	Append   string   // kernel command line after the common part
	IntRemap bool     // interrupt remapping in the emulated IOMMU
	Netdevs  []string // -netdev arguments, in order
	Devices  []string // further -device arguments, in order
	CPUs     int      // 0: one
	MemMB    int
	NetNS    string // the host network namespace QEMU runs in (its tap devices are there); "": the caller's
	Timeout  time.Duration
}

// Result is what a boot left behind.
type Result struct {
	Console string        // ttyS0: the kernel and init
	Output  string        // ttyS1: the guest test's step lines
	Elapsed time.Duration // QEMU start to exit
}

// QEMUVersion checks the emulator against the pin and returns its version
// line.
func QEMUVersion() (string, error) {
	out, err := exec.Command("qemu-system-x86_64", "--version").Output()
	if err != nil {
		return "", fmt.Errorf("vmtest: qemu-system-x86_64: %v (install qemu-system-x86: make deps)", err)
	}
	line, _, _ := strings.Cut(string(out), "\n")
	v := strings.TrimPrefix(line, "QEMU emulator version ")
	if !strings.HasPrefix(v, QEMUSeries) {
		return "", fmt.Errorf("vmtest: %q: the guests are pinned to QEMU %sx (Debian bookworm); its edu and e1000e quirks are worked around for that version (QEMUSeries in appliance/testbed/vmtest/kernel.go)", line, QEMUSeries)
	}
	return line, nil
}

// Boot runs the machine until the guest powers off or Timeout passes, and
// returns both serial ports. dir holds the port files.
func Boot(ctx context.Context, dir string, m Machine) (Result, error) {
	if _, err := QEMUVersion(); err != nil {
		return Result{}, err
	}
	console, output := filepath.Join(dir, "console.log"), filepath.Join(dir, "output.log")
	iommu := "intel-iommu,intremap=off"
	if m.IntRemap {
		iommu = "intel-iommu,intremap=on"
	}
	// Several vCPUs share one TCG thread: with a thread per vCPU
	// (multi-threaded TCG) the guest kernel's live text patching
	// (arch/x86/kernel/alternative.c text_poke_bp, behind static keys and
	// the BPF dispatcher) sometimes leaves another vCPU running a stale
	// int3, and 6.12 oopsed in sched_clock_cpu at boot and once in
	// bpf_dispatcher_xdp_func. One thread keeps the vCPUs' views of the
	// code coherent; the guests assert function, not speed.
	accel := "tcg"
	if m.CPUs > 1 {
		accel = "tcg,thread=single"
	}
	args := []string{
		"-accel", accel, "-machine", "q35", "-cpu", "max", "-smp", fmt.Sprint(max(m.CPUs, 1)), "-m", fmt.Sprint(m.MemMB),
		"-nodefaults", "-display", "none", "-no-reboot", "-no-user-config",
		"-device", iommu,
		"-kernel", m.Kernel.Vmlinuz(), "-initrd", m.Initrd,
		// no_timer_check: a busy host can starve the vCPU during the
		// kernel's timer check and the guest then panics.
		"-append", "console=ttyS0 panic=-1 no_timer_check intel_iommu=on iommu=pt " + m.Append,
		"-serial", "file:" + console, "-serial", "file:" + output,
	}
	for _, n := range m.Netdevs {
		args = append(args, "-netdev", n)
	}
	for _, d := range m.Devices {
		args = append(args, "-device", d)
	}
	args = append([]string{"qemu-system-x86_64"}, args...)
	if m.NetNS != "" {
		// nsenter execs QEMU: the PID killed on timeout is QEMU's.
		args = append([]string{"nsenter", "--net=/run/netns/" + m.NetNS, "--"}, args...)
	}
	ctx, cancel := context.WithTimeout(ctx, m.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	// A test binary killed by go test's timeout takes its guest with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	r := Result{Elapsed: time.Since(start)}
	c, _ := os.ReadFile(console)
	o, _ := os.ReadFile(output)
	r.Console, r.Output = string(c), string(o)
	switch {
	case ctx.Err() != nil:
		return r, fmt.Errorf("vmtest: guest still running after %v, killed (QEMU stderr: %s)", m.Timeout, stderr.String())
	case err != nil:
		return r, fmt.Errorf("vmtest: qemu: %v: %s", err, stderr.String())
	}
	return r, nil
}

// Step is one line of a guest's report: "STEP name: ok detail" or
// "STEP name: FAIL detail" (a name may itself contain ": ").
type Step struct {
	Name, Detail string
	OK           bool
}

var stepRE = regexp.MustCompile(`^STEP (.*?): (ok|FAIL)(?: (.*))?$`)

// ParseSteps returns the steps in order and the lines that are not steps.
func ParseSteps(out string) (steps []Step, other []string) {
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimRight(l, "\r")
		m := stepRE.FindStringSubmatch(l)
		if m == nil {
			other = append(other, l)
			continue
		}
		steps = append(steps, Step{Name: m[1], OK: m[2] == "ok", Detail: m[3]})
	}
	return steps, other
}
