//go:build !linux

package mlx5

import "errors"

// VFIO exists only on Linux.
type VFIO struct{}

// OpenVFIO fails: VFIO is a Linux interface.
func OpenVFIO(paths Paths, addr string, hugepages2M int) (*VFIO, error) {
	return nil, errors.New("mlx5: VFIO needs Linux")
}

// Bus is never reached.
func (v *VFIO) Bus() Bus { return Bus{} }

// Close does nothing.
func (v *VFIO) Close() error { return nil }

// IRQEventFD has no interrupt to offer.
func (v *VFIO) IRQEventFD() int { return -1 }

// VFIOInfo is what OpenVFIO negotiated; empty off Linux.
type VFIOInfo struct {
	Group      string
	IOMMU      string
	PageSize   uint64
	IOVARanges [][2]uint64
	BAR0Size   int
	IRQ        string
	IRQCount   int
}

// Info is empty.
func (v *VFIO) Info() VFIOInfo { return VFIOInfo{} }
