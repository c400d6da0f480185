//go:build !amd64

package mlx5

import "errors"

// dmaWritesOrdered is false off amd64: on arm64 the kernel puts dma_wmb()
// (dmb oshst) before the doorbell record and wmb() (dsb st) before the
// MMIO doorbell (drivers/net/ethernet/mellanox/mlx5/core/en/txrx.h
// mlx5e_notify_hw; arch/arm64/include/asm/barrier.h), and the data path
// has only Go atomics there, which order nothing towards the device. Until
// it has those barriers the VFIO backend is refused; AF_XDP works.
const dmaWritesOrdered = false

// checkDMAOrder is nil where the data path's doorbells are ordered.
func checkDMAOrder() error {
	if dmaWritesOrdered {
		return nil
	}
	return errors.New(dmaOrderReason)
}

const dmaOrderReason = "mlx5: the VFIO backend has no DMA write barriers for this architecture (the kernel's dma_wmb/wmb before the doorbells); use driver = afxdp"
