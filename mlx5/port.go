package mlx5

import (
	"errors"
	"fmt"
	"net"

	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// PortConfig describes the queues and steering of one Ethernet port.
type PortConfig struct {
	Queues int // RX/TX queue pairs (≥ 1)
	RQ     RQConfig
	// RXCQLogSize 0 means one CQE per stride worst case: LogWQEs + LogStrides.
	RXCQLogSize   uint8
	RXCompression CQECompression
	SQ            SQConfig
	MTU           int // L3 MTU
	Promiscuous   bool
	// RSSKey is the Toeplitz key of the RSS TIRs (Queues > 1).
	RSSKey [40]byte
}

// Port is everything created for one port, in creation order, plus the
// queue structs the data path runs on (queues.go).
type Port struct {
	h        *HCA
	PD, TD   uint32
	MkeyIdx  uint32
	LKey     uint32
	TIS      uint32
	RXCQs    []*CompletionQueue
	RQs      []*ReceiveQueue
	TXCQs    []*CompletionQueue
	SQs      []*SendQueue
	SQUARs   []uint32
	RQT      uint32
	TIR      uint32   // catch-all, direct to queue 0
	HashTIRs []uint32 // RSS TIRs by traffic type, in rssTypes order (Queues > 1)
	Table    uint32
	Groups   []uint32
	rootSet  bool
	fteSet   bool
	MAC      net.HardwareAddr

	undo []func() error
}

// OpenPort creates, in the order kernel mlx5e uses (en_main.c), PD, transport
// domain, PA mkey, TIS, per queue RX CQ + striding RQ (RDY) and TX CQ + SQ
// (RDY, own UAR), a direct TIR to queue 0 and, for more queues, an RQT and
// one Toeplitz TIR per traffic type, the NIC RX table classifying into them
// (see steering) set as root, port admin up (PAOS), and the
// vport context (MTU, own MAC as UC list, promiscuous mode). On error
// everything created is destroyed again.
func (h *HCA) OpenPort(cfg PortConfig) (p *Port, err error) {
	if cfg.Queues < 1 {
		return nil, fmt.Errorf("mlx5: port needs at least one queue")
	}
	p = &Port{h: h}
	defer func() {
		if err != nil {
			if cerr := p.Close(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("cleaning up: %w", cerr))
			}
			p = nil
		}
	}()
	if p.PD, err = h.AllocPD(); err != nil {
		return p, err
	}
	p.push(func() error { return h.DeallocPD(p.PD) })
	if p.TD, err = h.AllocTransportDomain(); err != nil {
		return p, err
	}
	p.push(func() error { return h.DeallocTransportDomain(p.TD) })
	if p.MkeyIdx, p.LKey, err = h.CreatePAMkey(p.PD); err != nil {
		return p, err
	}
	p.push(func() error { return h.DestroyMkey(p.MkeyIdx) })
	if p.TIS, err = h.CreateTIS(p.TD); err != nil {
		return p, err
	}
	p.push(func() error { return h.DestroyTIS(p.TIS) })

	rxLog := cfg.RXCQLogSize
	if rxLog == 0 {
		rxLog = min(cfg.RQ.LogWQEs+cfg.RQ.LogStrides, h.Caps.LogMaxCQSz)
	}
	var rqns []uint32
	for q := 0; q < cfg.Queues; q++ {
		rxcq, err := h.CreateCQ(CQConfig{LogSize: rxLog, Compression: cfg.RXCompression})
		if err != nil {
			return p, err
		}
		p.RXCQs = append(p.RXCQs, rxcq)
		p.push(func() error { return h.DestroyCQ(rxcq) })
		rq, err := h.CreateRQ(cfg.RQ, rxcq, p.PD, p.LKey)
		if err != nil {
			return p, err
		}
		p.RQs = append(p.RQs, rq)
		p.push(func() error { return h.DestroyRQ(rq) })
		rqns = append(rqns, rq.RQN)

		txcq, err := h.CreateCQ(CQConfig{LogSize: cfg.SQ.LogWQEBBs})
		if err != nil {
			return p, err
		}
		p.TXCQs = append(p.TXCQs, txcq)
		p.push(func() error { return h.DestroyCQ(txcq) })
		uar, err := h.AllocUAR()
		if err != nil {
			return p, err
		}
		p.SQUARs = append(p.SQUARs, uar)
		p.push(func() error { return h.DeallocUAR(uar) })
		sq, err := h.CreateSQ(cfg.SQ, txcq, p.PD, p.TIS, uar, p.LKey)
		if err != nil {
			return p, err
		}
		p.SQs = append(p.SQs, sq)
		p.push(func() error { return h.DestroySQ(sq) })
	}

	// Catch-all TIR: everything not classified below goes to queue 0.
	if p.TIR, err = h.CreateTIRDirect(p.TD, rqns[0]); err != nil {
		return p, err
	}
	p.push(func() error { return h.DestroyTIR(p.TIR) })
	if err := p.steering(cfg, rqns); err != nil {
		return p, err
	}
	if err = h.SetRoot(p.Table, false); err != nil {
		return p, err
	}
	p.push(func() error { return h.SetRoot(0, true) })
	if err = h.SetPortAdminUp(true); err != nil {
		return p, err
	}

	v, err := h.QueryVport()
	if err != nil {
		return p, err
	}
	p.MAC = v.MAC
	mtu := cfg.MTU
	if mtu == 0 {
		mtu = 1500
	}
	// The port MTU first, then the vport's (kernel mlx5e_set_mtu): the
	// port keeps whatever its previous owner set until PMTU is written.
	if err = h.SetPortMTU(mtu + prm.HWMTUOverhead); err != nil {
		return p, err
	}
	if err = h.SetVport(mtu, []net.HardwareAddr{v.MAC}, cfg.Promiscuous, cfg.Promiscuous, cfg.Promiscuous); err != nil {
		return p, err
	}
	// Local loopback off, as the kernel leaves it (mlx5e's
	// mlx5_nic_vport_update_local_lb(mdev, false) path): otherwise the
	// port's own broadcasts and multicasts come back to it.
	if err = h.DisableLocalLoopback(); err != nil {
		return p, err
	}
	return p, nil
}

func (p *Port) push(f func() error) { p.undo = append(p.undo, f) }

// Close destroys everything in reverse creation order. It keeps going on
// errors (so as much as possible is released) and reports them all.
func (p *Port) Close() error {
	var errs []error
	for i := len(p.undo) - 1; i >= 0; i-- {
		if err := p.undo[i](); err != nil {
			errs = append(errs, err)
		}
	}
	p.undo = nil
	return errors.Join(errs...)
}

// rssTypes are the traffic types hashed over all queues when there is more
// than one (the kernel's TTC defaults, lib/fs_ttc.c): TCP and UDP over
// IPv4 and IPv6 on addresses and ports, other IPv4/IPv6 on addresses.
var rssTypes = []struct {
	ethertype uint16
	proto     uint8 // 0: any
	ipv6, udp bool
	fields    uint32
}{
	{0x0800, 6, false, false, prm.HashSrcIP | prm.HashDstIP | prm.HashL4SPort | prm.HashL4DPort},
	{0x0800, 17, false, true, prm.HashSrcIP | prm.HashDstIP | prm.HashL4SPort | prm.HashL4DPort},
	{0x86DD, 6, true, false, prm.HashSrcIP | prm.HashDstIP | prm.HashL4SPort | prm.HashL4DPort},
	{0x86DD, 17, true, true, prm.HashSrcIP | prm.HashDstIP | prm.HashL4SPort | prm.HashL4DPort},
	{0x0800, 0, false, false, prm.HashSrcIP | prm.HashDstIP},
	{0x86DD, 0, true, false, prm.HashSrcIP | prm.HashDstIP},
}

// steering builds the NIC RX table. One queue: a single catch-all entry to
// the direct TIR. More: an RQT over the RQs, one Toeplitz TIR per traffic
// type, a group matching ethertype + IP protocol (entries 0..3), one
// matching ethertype (4..5) and a catch-all (6) to the direct TIR. Ethertype
// rather than ip_version is matched because every device supports it (the
// kernel uses ip_version only with cap outer_ip_version).
func (p *Port) steering(cfg PortConfig, rqns []uint32) (err error) {
	h := p.h
	if p.Table, err = h.CreateFlowTable(0, 3); err != nil {
		return err
	}
	p.push(func() error { return h.DestroyFlowTable(p.Table) })
	group := func(start, end uint32, m Match) (uint32, error) {
		g, err := h.CreateFlowGroup(p.Table, start, end, m)
		if err != nil {
			return 0, err
		}
		p.Groups = append(p.Groups, g)
		p.push(func() error { return h.DestroyFlowGroup(p.Table, g) })
		return g, nil
	}
	entry := func(g, index uint32, ethertype uint16, proto uint8, tir uint32) error {
		if err := h.SetFTEForwardToTIR(p.Table, g, index, ethertype, proto, tir); err != nil {
			return err
		}
		p.push(func() error { return h.DeleteFTE(p.Table, index) })
		return nil
	}
	if cfg.Queues > 1 {
		size := 1
		for size < cfg.Queues {
			size <<= 1
		}
		if p.RQT, err = h.CreateRQT(rqns, size); err != nil {
			return err
		}
		p.push(func() error { return h.DestroyRQT(p.RQT) })
		for _, t := range rssTypes {
			tir, err := h.CreateTIRRSS(p.TD, p.RQT, RSS{Key: cfg.RSSKey, IPv6: t.ipv6, UDP: t.udp, Fields: t.fields})
			if err != nil {
				return err
			}
			p.HashTIRs = append(p.HashTIRs, tir)
			p.push(func() error { return h.DestroyTIR(tir) })
		}
		l4, err := group(0, 3, Match{Ethertype: true, IPProtocol: true})
		if err != nil {
			return err
		}
		l3, err := group(4, 5, Match{Ethertype: true})
		if err != nil {
			return err
		}
		for i, t := range rssTypes {
			g := l4
			if t.proto == 0 {
				g = l3
			}
			if err := entry(g, uint32(i), t.ethertype, t.proto, p.HashTIRs[i]); err != nil {
				return err
			}
		}
	}
	any, err := group(6, 6, Match{})
	if err != nil {
		return err
	}
	return entry(any, 6, 0, 0, p.TIR)
}
