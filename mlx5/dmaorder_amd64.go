package mlx5

import "errors"

// dmaWritesOrdered says the driver's stores reach the device in program
// order before its doorbell: on amd64 stores are not reordered with other
// stores (Intel SDM vol. 3A §9.2.2), so the Go atomics the data path uses
// for the doorbell record and the MMIO doorbell are enough. Where that
// does not hold, OpenVFIO refuses (dmaorder_other.go).
const dmaWritesOrdered = true

// checkDMAOrder is nil where the data path's doorbells are ordered.
func checkDMAOrder() error {
	if dmaWritesOrdered {
		return nil
	}
	return errors.New(dmaOrderReason)
}

const dmaOrderReason = ""
