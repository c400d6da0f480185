package dp

import (
	"errors"
	"fmt"
)

// The structs below are what this package needs from object creation. They
// mirror mlx5.CompletionQueue / ReceiveQueue / SendQueue field for field (the
// VFIO constructor copies them over), so the data path depends on nothing but
// memory and numbers.

// CQMem is a created completion queue.
type CQMem struct {
	CQN     uint32
	Ring    []byte // 1<<LogSize CQEs of 64 bytes, pre-filled with op_own 0xF1
	LogSize uint8
	DBRec   []byte // 8 bytes; set_ci at 0..3
	// Compressed: the CQ was created with cqe_comp_en; Enhanced selects
	// cqe_compression_layout 1 (validity by iteration count, mini-CQE blocks
	// after a title CQE) instead of the basic layout.
	Compressed bool
	Enhanced   bool
	// MiniFormat is cqc.mini_cqe_res_format (MiniFmt*).
	MiniFormat uint8
}

// RQMem is a created cyclic striding RQ (wq_type 3) and its buffer window.
type RQMem struct {
	RQN uint32
	// WQType must be WQTypeCyclicStride (0 is taken as that); the kernel's
	// linked-list striding RQ (2) is not implemented.
	WQType        uint8
	Ring          []byte // 1<<LogWQEs WQEs of RxWQESize bytes
	LogWQEs       uint8
	LogStrides    uint8 // log2(strides per WQE)
	LogStrideSize uint8 // log2(stride bytes), at most 12 (a stride never spans host pages)
	DBRec         []byte
	LKey          uint32

	// Buffers is the receive window (1<<LogWQEs WQEs × strides × stride
	// bytes, plus one guard page) followed by Spare extra buffers of one
	// stride each that Alloc lends out. The device sees it at IOVA,
	// contiguous; the host pages behind it may sit anywhere (page_pool-like).
	IOVA  uint64
	Pages [][]byte // 4 KiB host pages in IOVA order
	Spare int
}

// SQMem is a created send queue.
type SQMem struct {
	SQN       uint32
	Ring      []byte // 1<<LogWQEBBs basic blocks of 64 bytes
	LogWQEBBs uint8
	DBRec     []byte
	LKey      uint32
	// MMIO and Doorbell: the doorbell is MMIO.Write64(Doorbell, first 8
	// bytes of the last WQE's control segment, big-endian).
	MMIO     Doorbeller
	Doorbell uint32
	// MinInline: header bytes every SEND must carry inline (0 = none). When
	// it is non-zero eMPWQE cannot be used (DPDK mlx5.c mlx5_set_min_inline).
	MinInline int
	// EnhancedMPW: the device supports opcode 0x29.
	EnhancedMPW bool
	// MaxWQEBBs is the device's largest WQE (cap max_wqe_sz_sq / 64, at
	// most 16); 0 means 16. eMPWQE sessions are capped by it.
	MaxWQEBBs int
}

// Doorbeller is the BAR0 write the send doorbell needs (mlx5.MMIO has it).
type Doorbeller interface {
	Write64(off uint32, v uint64)
}

// PageSize is the host page granule of the buffer window.
const PageSize = 4096

// ShinfoSize is the buffer-resident packet record placed right after the
// packet data, cache-line aligned, where the kernel puts skb_shared_info.
const ShinfoSize = 64

func checkPow2Ring(name string, b []byte, log uint8, entry int) error {
	if log > 24 {
		return fmt.Errorf("dp: %s log size %d too large", name, log)
	}
	if len(b) < entry<<log {
		return fmt.Errorf("dp: %s ring is %d bytes, need %d", name, len(b), entry<<log)
	}
	return nil
}

var errDBRec = errors.New("dp: doorbell record shorter than 8 bytes")

// StrideSizeLog is the stride size (log2) for a linear striding RQ: the
// smallest power of two holding the headroom, the largest frame rounded up
// to a cache line, and the shinfo record behind it (kernel en/params.c
// mlx5e_mpwqe_get_log_stride_size does the same for a linear SKB).
func StrideSizeLog(headroom, maxFrame int) uint8 {
	need := headroom + (maxFrame+63)&^63 + ShinfoSize
	l := uint8(MPWRQMinStrideLog)
	for 1<<l < need {
		l++
	}
	return l
}
