package daemon

import (
	"fmt"

	"github.com/ovfwd/ovfwd/config"
	"github.com/ovfwd/ovfwd/mlx5"
)

// vfioDriver is the kernel driver a PCI function must be bound to for
// ovfwd's userspace mlx5 driver to reach it.
const vfioDriver = "vfio-pci"

// choice is the backend picked for one port and why.
type choice struct {
	driver string // config.DriverAFXDP, DriverAFXDPCopy, DriverVFIO or DriverMLX5Sim
	reason string
}

// choose applies `driver = "auto"`: VFIO when the port's PCI function is a
// ConnectX bound to vfio-pci, else AF_XDP (zero-copy when the NIC driver
// has it, which afxdp.Open finds out per queue), else AF_XDP copy mode.
// fns are the ConnectX functions on this machine.
func choose(p *config.Port, fns []mlx5.Function) choice {
	switch p.Driver {
	case config.DriverAuto:
	case config.DriverAFXDPCopy:
		return choice{p.Driver, "configured: driver = afxdp-copy"}
	case config.DriverAFXDP:
		if p.AFXDP.ZeroCopy == config.Off {
			return choice{config.DriverAFXDPCopy, "configured: driver = afxdp with zerocopy = off"}
		}
		return choice{p.Driver, "configured: driver = afxdp"}
	default:
		return choice{p.Driver, "configured: driver = " + p.Driver}
	}
	if p.PCI != "" {
		for _, f := range fns {
			if f.Addr != p.PCI {
				continue
			}
			if f.Driver == vfioDriver {
				return choice{config.DriverVFIO, fmt.Sprintf("auto: %s is a %s bound to %s", f.Addr, f.Name, vfioDriver)}
			}
			if p.IfName == "" {
				return choice{config.DriverVFIO, fmt.Sprintf("auto: %s is a %s (driver %q) and no ifname is set for AF_XDP", f.Addr, f.Name, f.Driver)}
			}
			return choice{afxdpFor(p), fmt.Sprintf("auto: %s is a %s bound to %q, not %s; using AF_XDP on %s", f.Addr, f.Name, f.Driver, vfioDriver, p.IfName)}
		}
		if p.IfName == "" {
			return choice{config.DriverVFIO, fmt.Sprintf("auto: no ConnectX at %s and no ifname for AF_XDP", p.PCI)}
		}
		return choice{afxdpFor(p), fmt.Sprintf("auto: %s is not a ConnectX function; using AF_XDP on %s", p.PCI, p.IfName)}
	}
	return choice{afxdpFor(p), "auto: no pci set; AF_XDP on " + p.IfName + ", zero-copy if its driver supports it"}
}

func afxdpFor(p *config.Port) string {
	if p.AFXDP.ZeroCopy == config.Off {
		return config.DriverAFXDPCopy
	}
	return config.DriverAFXDP
}
