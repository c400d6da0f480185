package mlx5

import (
	"errors"
	"fmt"
)

// VFIOPort is a forwarding port on a ConnectX function driven over VFIO:
// what driver = "vfio" runs. Close closes the port, tears the function down
// (pages reclaimed, DISABLE_HCA) and releases VFIO, in that order.
type VFIOPort struct {
	*FwdPort
	HCA  *HCA
	vfio *VFIO
}

// OpenVFIOPort opens the function at addr (OpenVFIO: preflight, container,
// group, BAR0, hugepage DMA budget), brings it up (Open) and creates a
// forwarding port on it (NewFwdPort). Any failure undoes what was done and
// says which step failed; without /dev/vfio or a bound device the error is
// Preflight's, naming the operator's fix.
func OpenVFIOPort(paths Paths, addr string, hugepages2M int, opt Options, cfg FwdPortConfig) (*VFIOPort, error) {
	v, err := OpenVFIO(paths, addr, hugepages2M)
	if err != nil {
		return nil, err
	}
	h, err := Open(v.Bus(), opt)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("mlx5 %s: bring-up: %w", addr, err), v.Close())
	}
	p, err := NewFwdPort(h, cfg)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("mlx5 %s: port: %w", addr, err), h.Close(), v.Close())
	}
	return &VFIOPort{FwdPort: p, HCA: h, vfio: v}, nil
}

// Close destroys the port, then the function's state, then the VFIO handles.
func (p *VFIOPort) Close() error {
	if p.vfio == nil {
		return nil
	}
	err := errors.Join(p.FwdPort.Close(), p.HCA.Close(), p.vfio.Close())
	p.vfio = nil
	return err
}
