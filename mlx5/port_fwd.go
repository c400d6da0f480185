package mlx5

import (
	"errors"
	"fmt"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/mlx5/dp"
	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// This file joins object creation (OpenPort) and the data path (mlx5/dp):
// it is what driver = "vfio" runs, and what mlx5/model/fullsim runs on the model.

// FwdPortConfig describes a forwarding port: its queues, ring sizes and data
// path options. Zero values pick defaults that fit the device's caps.
type FwdPortConfig struct {
	Name        string
	Queues      int // RX/TX queue pairs; 0 means 1
	MTU         int // L3 MTU; 0 means 1500
	PoolID      uint16
	Promiscuous bool

	LogWQEs    uint8 // striding RQ WQEs; 0 means 4 (16)
	LogStrides uint8 // strides per WQE; 0 means 6 (64), clamped to the caps
	LogSQ      uint8 // SQ WQEBBs; 0 means 10 (1024)
	Spare      int   // buffers per queue for Alloc; 0 means 256

	// StripVLAN creates the RQs with VLAN stripping (RQConfig.StripVLAN).
	StripVLAN bool

	// RXCompression enables CQE compression on the RX CQs (checked
	// against caps by CreateCQ).
	RXCompression CQECompression
	// RSSKey is the Toeplitz key; all zero picks DefaultRSSKey.
	RSSKey [prm.ToeplitzKeySize]byte

	// Rx and Tx tune the data path. Note Rx.PrefetchDistance 0 means
	// prefetch off; −1 selects dp's default (4).
	Rx dp.RxOptions
	Tx dp.TxOptions
}

// DefaultRSSKey is the Toeplitz key of the Microsoft RSS verification suite,
// the one most drivers default to.
var DefaultRSSKey = [prm.ToeplitzKeySize]byte{
	0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
	0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
	0x6a, 0x42, 0xb3, 0xbb, 0xbe, 0xac, 0x01, 0xfa,
}

// FwdPort is an mlx5 port as a fwd.Port: the data path (*dp.Port, whose
// methods it has) over the objects OpenPort created (Objects) and the RX
// buffer windows it allocated from the DMA seam.
type FwdPort struct {
	*dp.Port
	Objects *Port

	h       *HCA
	windows []uint64 // IOVAs of the RX buffer windows
}

// NewFwdPort creates a port's objects (OpenPort: cyclic striding RQs, SQs,
// RSS steering, vport), an RX buffer window per queue from the DMA seam
// (reached by the port's PA mkey, as every mapped IOVA is), and the data
// path queues over them. Close destroys everything in reverse order:
// the data path, the firmware objects, then the buffer windows (only once no
// RQ can write into them any more).
func NewFwdPort(h *HCA, cfg FwdPortConfig) (p *FwdPort, err error) {
	cfg, rqc, err := fwdDefaults(h, cfg)
	if err != nil {
		return nil, err
	}
	p = &FwdPort{h: h}
	defer func() {
		if err != nil {
			err = errors.Join(err, p.release())
			p = nil
		}
	}()

	window := geometry(cfg).WindowBytes(rqc.LogStrideSize)
	var pages [][][]byte
	var iovas []uint64
	for q := 0; q < cfg.Queues; q++ {
		buf, iova, err := h.bus.DMA.Alloc(window, dp.PageSize)
		if err != nil {
			return p, fmt.Errorf("mlx5: RX buffer window: %w", err)
		}
		p.windows = append(p.windows, iova)
		var pg [][]byte
		for off := 0; off < window; off += dp.PageSize {
			pg = append(pg, buf[off:off+dp.PageSize:off+dp.PageSize])
		}
		pages = append(pages, pg)
		iovas = append(iovas, iova)
	}

	if p.Objects, err = h.OpenPort(PortConfig{
		Queues: cfg.Queues, RQ: rqc, RXCompression: cfg.RXCompression,
		SQ: SQConfig{LogWQEBBs: cfg.LogSQ}, MTU: cfg.MTU, Promiscuous: cfg.Promiscuous, RSSKey: cfg.RSSKey,
	}); err != nil {
		return p, err
	}
	o := p.Objects

	minInline, err := inlineBytes(h.Caps.MinInline)
	if err != nil {
		return p, err
	}
	queues := make([]dp.Queue, cfg.Queues)
	for q := range queues {
		rq := o.RQs[q]
		if rq.WQType != prm.WQTypeCyclicStridingRQ || rq.TwoByteShift {
			return p, fmt.Errorf("mlx5: RQ %#x is wq_type %d (two-byte shift %v); the data path needs a cyclic striding RQ without shift",
				rq.RQN, rq.WQType, rq.TwoByteShift)
		}
		rqDBR, err := dbRecord(rq.DBRec)
		if err != nil {
			return p, err
		}
		rxcq, err := cqMem(o.RXCQs[q])
		if err != nil {
			return p, err
		}
		sq := o.SQs[q]
		txcq, err := cqMem(o.TXCQs[q])
		if err != nil {
			return p, err
		}
		if queues[q], err = dp.NewQueue(rxcq, &dp.RQMem{
			RQN: rq.RQN, WQType: rq.WQType, Ring: rq.Ring, LogWQEs: rq.LogWQEs,
			LogStrides: rq.LogStrides, LogStrideSize: rq.LogStrideSize, DBRec: rqDBR, LKey: rq.LKey,
			IOVA: iovas[q], Pages: pages[q], Spare: cfg.Spare,
		}, txcq, &dp.SQMem{
			SQN: sq.SQN, Ring: sq.Ring, LogWQEBBs: sq.LogWQEBBs, DBRec: sq.DBRec, LKey: sq.LKey,
			MMIO: h.bus.MMIO, Doorbell: sq.Doorbell, MinInline: minInline, EnhancedMPW: sq.EnhancedMPW, MaxWQEBBs: sq.MaxWQEBBs,
		}, cfg.PoolID, cfg.Rx, cfg.Tx); err != nil {
			return p, err
		}
	}
	info := fwd.PortInfo{Name: cfg.Name, MAC: o.MAC, MTU: cfg.MTU}
	if p.Port, err = dp.NewPort(info, queues, p.release); err != nil {
		return p, err
	}
	return p, nil
}

// release destroys the firmware objects, then frees the buffer windows.
func (p *FwdPort) release() error {
	var errs []error
	if p.Objects != nil {
		errs = append(errs, p.Objects.Close())
		p.Objects = nil
	}
	for i := len(p.windows) - 1; i >= 0; i-- {
		errs = append(errs, p.h.bus.DMA.Free(p.windows[i]))
	}
	p.windows = nil
	return errors.Join(errs...)
}

func geometry(cfg FwdPortConfig) dp.Geometry {
	return dp.Geometry{MTU: cfg.MTU, LogWQEs: cfg.LogWQEs, LogStrides: cfg.LogStrides, LogSQ: cfg.LogSQ, Spare: cfg.Spare}
}

// fwdDefaults fills cfg from dp.Geometry's defaults (the ones the
// data-path model's port uses too), then fits the RQ to the caps.
func fwdDefaults(h *HCA, cfg FwdPortConfig) (FwdPortConfig, RQConfig, error) {
	if cfg.Queues == 0 {
		cfg.Queues = 1
	}
	g := geometry(cfg).WithDefaults()
	cfg.MTU, cfg.LogWQEs, cfg.LogStrides, cfg.LogSQ, cfg.Spare = g.MTU, g.LogWQEs, g.LogStrides, g.LogSQ, g.Spare
	cfg.Rx = g.RxDefaults(cfg.Rx)
	if cfg.RSSKey == ([prm.ToeplitzKeySize]byte{}) {
		cfg.RSSKey = DefaultRSSKey
	}
	c := h.Caps
	rq := RQConfig{
		LogWQEs:       cfg.LogWQEs,
		LogStrides:    min(max(cfg.LogStrides, c.MinLogStrides), c.MaxLogStrides),
		LogStrideSize: max(dp.StrideSizeLog(cfg.Rx.Headroom, cfg.Rx.MaxFrame), c.MinLogStrideSize),
		StripVLAN:     cfg.StripVLAN,
	}
	if rq.LogStrideSize > 12 {
		// dp places one packet per stride and a stride never spans host pages.
		return cfg, rq, fmt.Errorf("mlx5: MTU %d needs 2^%d-byte strides; the data path handles at most 4 KiB", cfg.MTU, rq.LogStrideSize)
	}
	return cfg, rq, nil
}

// inlineBytes converts the SQ's min-inline mode into the header bytes every
// SEND must carry. Only L2 is a fixed size; IP and TCP/UDP modes depend on
// each packet's headers, which the data path does not compute.
func inlineBytes(mode uint8) (int, error) {
	switch mode {
	case prm.InlineNone:
		return 0, nil
	case prm.InlineL2:
		return dp.MinInlineL2, nil
	}
	return 0, fmt.Errorf("mlx5: device requires min-inline mode %d (IP or TCP/UDP headers); the data path supports none or L2", mode)
}

// dbRecord widens a doorbell record to the 8 bytes dp checks; allocRing
// hands out 64-byte blocks, so the capacity is there.
func dbRecord(b []byte) ([]byte, error) {
	if cap(b) < 8 {
		return nil, errors.New("mlx5: doorbell record shorter than 8 bytes")
	}
	return b[:8], nil
}

func cqMem(c *CompletionQueue) (*dp.CQMem, error) {
	if c.CQESize != 64 {
		return nil, fmt.Errorf("mlx5: CQ %#x has %d-byte CQEs; the data path reads 64", c.CQN, c.CQESize)
	}
	dbr, err := dbRecord(c.DBRec)
	if err != nil {
		return nil, err
	}
	return &dp.CQMem{
		CQN: c.CQN, Ring: c.Ring, LogSize: c.LogSize, DBRec: dbr,
		Compressed: c.Compression.Enabled, Enhanced: c.Compression.Layout == prm.CQECompLayoutEnhanced,
		MiniFormat: c.Compression.MiniFormat,
	}, nil
}

var _ fwd.Port = (*FwdPort)(nil)
