package mlx5

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// probeHugepages is the DMA budget probe needs: command queue, mailboxes,
// firmware pages and the async EQ fit in a few 2 MiB pages.
const probeHugepages = 4

// Probe lists the ConnectX functions on this machine with their driver and
// IOMMU group and, for pciAddr (or every vfio-pci bound function when
// pciAddr is empty), brings the function up, prints firmware version,
// capabilities and link state, and tears it down. Where VFIO cannot be
// used it prints why and the exact fix. It is `ovfwd probe [--pci ADDR]`.
func Probe(w io.Writer, pciAddr string) error {
	return ProbePaths(w, DefaultPaths, pciAddr, Options{PollInterval: 100 * time.Microsecond, CommandTimeout: 10 * time.Second})
}

// ProbePaths is Probe with injectable filesystem roots and timing.
func ProbePaths(w io.Writer, paths Paths, pciAddr string, opt Options) error {
	fns, err := ListFunctions(paths)
	if err != nil {
		return err
	}
	_, vfioErr := os.Stat(filepath.Join(paths.Dev, "vfio/vfio"))
	if len(fns) == 0 {
		fmt.Fprintln(w, "No ConnectX (mlx5) PCI functions found.")
	} else {
		fmt.Fprintf(w, "%-14s %-18s %-12s %s\n", "PCI", "device", "driver", "IOMMU group")
		for _, f := range fns {
			drv, grp := f.Driver, f.IOMMUGroup
			if drv == "" {
				drv = "(none)"
			}
			if grp == "" {
				grp = "(none)"
			}
			fmt.Fprintf(w, "%-14s %-18s %-12s %s\n", f.Addr, fmt.Sprintf("%s [%04x]", f.Name, f.DeviceID), drv, grp)
		}
	}
	if vfioErr != nil {
		p := noVFIOProblem(paths)
		fmt.Fprintf(w, "VFIO is not available: %s\n  fix: %s\n", p.What, strings.ReplaceAll(p.Fix, "\n", "\n       "))
	}
	var targets []string
	if pciAddr != "" {
		targets = []string{pciAddr}
	} else {
		for _, f := range fns {
			if f.Driver == "vfio-pci" {
				targets = append(targets, f.Addr)
			}
		}
		if len(targets) == 0 && len(fns) > 0 {
			fmt.Fprintln(w, "No function is bound to vfio-pci; run `ovfwd probe --pci ADDR` for the exact steps for one of them.")
		}
	}
	var errs []error
	for _, addr := range targets {
		if err := probeOne(w, paths, addr, opt); err != nil {
			fmt.Fprintln(w, err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func probeOne(w io.Writer, paths Paths, addr string, opt Options) error {
	budget := probeHugepages
	for try := 0; ; try++ {
		v, err := OpenVFIO(paths, addr, budget)
		if err != nil {
			return err
		}
		err = Describe(w, addr, v.Bus(), opt)
		v.Close()
		var pb *PageBudgetError
		if try > 0 || !errors.As(err, &pb) {
			return err
		}
		// Size the budget from what the firmware asked for and try once
		// more; say so, as it is what `ovfwd run` will need too.
		budget += (pb.Asked*4096+hugePage2MBytes-1)/hugePage2MBytes + 1
		fmt.Fprintf(w, "%s: firmware asks for %d pages (%d KiB); retrying with %d hugepages\n", addr, pb.Asked, pb.Asked*4, budget)
	}
}

const hugePage2MBytes = 2 << 20

// Describe brings the function on bus up, prints what probe shows and tears
// it down again.
func Describe(w io.Writer, addr string, bus Bus, opt Options) (err error) {
	h, err := Open(bus, opt)
	if err != nil {
		return fmt.Errorf("%s: bring-up failed: %w", addr, err)
	}
	defer func() {
		if cerr := h.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("%s: teardown: %w", addr, cerr)
		}
	}()
	c := h.Caps
	fmt.Fprintf(w, "%s: firmware %s\n", addr, h.FW)
	v, err := h.QueryVport()
	if err != nil {
		return err
	}
	link, err := h.QueryLink()
	if err != nil {
		return err
	}
	state := "down"
	if link.Up {
		state = "up"
	}
	fmt.Fprintf(w, "  MAC %s, HW MTU %d, link %s (admin up %v)\n", v.MAC, v.HWMTU, state, link.AdminUp)
	if c.StridingRQ {
		fmt.Fprintf(w, "  striding RQ: 2^%d..2^%d strides of 2^%d..2^%d bytes\n", c.MinLogStrides, c.MaxLogStrides, c.MinLogStrideSize, c.MaxLogStrideSz)
	} else {
		fmt.Fprintln(w, "  striding RQ: not supported")
	}
	comp := "none"
	switch {
	case c.CQECompression && c.EnhancedCQECompression:
		comp = "basic, enhanced"
	case c.CQECompression:
		comp = "basic"
	}
	fmt.Fprintf(w, "  CQE compression: %s (max %d per session, stride index in mini CQE %v)\n", comp, c.CQECompressionMaxNum, c.MiniCQEStrideIndex)
	fmt.Fprintf(w, "  TX: enhanced MPWQE %v, minimum inline %s, max WQE %d bytes\n", c.EnhancedMPW, inlineName(c.MinInline), c.MaxWQESzSQ)
	fmt.Fprintf(w, "  queues: CQ ≤ 2^%d, WQ ≤ 2^%d, RSS table ≤ 2^%d; NIC RX flow tables %v\n", c.LogMaxCQSz, c.LogMaxWQSz, c.LogMaxRQTSize, c.NICFlowTable)
	return nil
}

func inlineName(m uint8) string {
	switch m {
	case prm.InlineNone:
		return "none"
	case prm.InlineL2:
		return "L2"
	case prm.InlineIP:
		return "IP"
	case prm.InlineTCPUDP:
		return "TCP/UDP"
	}
	return fmt.Sprint(m)
}
