package fullsim

import (
	"fmt"

	"github.com/ovfwd/ovfwd/mlx5/dp"
	"github.com/ovfwd/ovfwd/mlx5/model/dpsim"
	"github.com/ovfwd/ovfwd/mlx5/model/sim"
	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// txEngine is the send engine serving one SQ of the command model.
type txEngine struct {
	sqn   uint32
	info  sim.SQInfo
	gen   uint64 // command generation it was last validated at
	queue int    // index in the open port, or -1
	q     *dpsim.TxQueue
}

// uarWrite is every UAR write the command model does not consume itself.
// Only send doorbells (UAR page + 0x800, 8 bytes) are modelled.
func (d *Device) uarWrite(off uint32, v uint64) {
	if off%prm.UARPageSize != prm.UARBlueFlameOffset {
		d.mu.Lock()
		d.fail(fmt.Errorf("fullsim: write %#x to unmodelled UAR offset %#x", v, off))
		d.mu.Unlock()
		return
	}
	sqn := uint32(v>>8) & 0xFFFFFF
	d.mu.Lock()
	e := d.txBinding(sqn, off/prm.UARPageSize)
	d.mu.Unlock()
	if e != nil {
		// Outside the lock: the sink may inject into this very device.
		e.q.Doorbell(v)
	}
}

// txBinding finds (or creates) the engine of sqn, revalidated against the
// command model when a command ran since. Called with d.mu held.
func (d *Device) txBinding(sqn, uar uint32) *txEngine {
	gen := d.gen.Load()
	var e *txEngine
	for _, t := range d.tx {
		if t.sqn == sqn {
			e = t
			break
		}
	}
	if e != nil && e.gen == gen && e.info.UAR == uar {
		return e
	}
	info, ok := d.model.SQ(sqn)
	switch {
	case !ok:
		d.fail(fmt.Errorf("fullsim: send doorbell on UAR %d names SQ %#x, which does not exist", uar, sqn))
		return nil
	case info.UAR != uar:
		d.fail(fmt.Errorf("fullsim: send doorbell for SQ %#x on UAR %d; the SQ was created on UAR %d", sqn, uar, info.UAR))
		return nil
	case info.State != prm.QueueStateRDY:
		d.fail(fmt.Errorf("fullsim: send doorbell for SQ %#x in state %d (not RDY)", sqn, info.State))
		return nil
	}
	if e != nil && e.info.Base == info.Base && e.info.DBR == info.DBR && e.info.CQN == info.CQN {
		e.gen, e.info = gen, info
		return e
	}
	q, err := d.newTxEngine(info)
	if err != nil {
		d.fail(err)
		return nil
	}
	if e == nil {
		e = &txEngine{sqn: sqn}
		d.tx = append(d.tx, e)
	}
	e.info, e.gen, e.q, e.queue = info, gen, q, -1
	var sink dpsim.Sink
	for i, s := range d.sqns {
		if s == sqn {
			e.queue = i
			if i < len(d.sinks) {
				sink = d.sinks[i]
			}
		}
	}
	q.Sink = d.wire(sink)
	return e
}

// newTxEngine builds the send engine from what CREATE_SQ and CREATE_CQ
// gave the command model, read through the model's DMA view.
func (d *Device) newTxEngine(info sim.SQInfo) (*dpsim.TxQueue, error) {
	cq, ok := d.model.CQ(info.CQN)
	if !ok {
		return nil, fmt.Errorf("fullsim: SQ %#x completes to missing CQ %#x", info.SQN, info.CQN)
	}
	cqm, err := d.cqMem(cq)
	if err != nil {
		return nil, err
	}
	ring, err := d.mem.Slice(info.Base, (1<<info.LogWQSz)*prm.SendWQEBB)
	if err != nil {
		return nil, err
	}
	dbr, err := d.mem.Slice(info.DBR, 8)
	if err != nil {
		return nil, err
	}
	var minInline int
	switch info.MinInline {
	case prm.InlineNone:
	case prm.InlineL2:
		minInline = prm.MinInlineL2
	default:
		return nil, fmt.Errorf("fullsim: SQ %#x min-inline mode %d is not modelled", info.SQN, info.MinInline)
	}
	q := dpsim.NewTxQueue(d.view, &dp.SQMem{SQN: info.SQN, Ring: ring, LogWQEBBs: info.LogWQSz, DBRec: dbr,
		MinInline: minInline, EnhancedMPW: info.AllowMPW && d.cfg.Sim.EnhancedMPW}, cqm)
	q.MaxFrame = d.maxFrame()
	q.MaxWQEBBs = min(16, d.cfg.Sim.MaxWQESzSQ/prm.SendWQEBB)
	return q, nil
}

func (d *Device) cqMem(cq sim.CQInfo) (*dp.CQMem, error) {
	ring, err := d.mem.Slice(cq.Base, prm.CQESize<<cq.LogSize)
	if err != nil {
		return nil, err
	}
	dbr, err := d.mem.Slice(cq.DBR, 8)
	if err != nil {
		return nil, err
	}
	return &dp.CQMem{CQN: cq.CQN, Ring: ring, LogSize: cq.LogSize, DBRec: dbr, Compressed: cq.CompEn,
		Enhanced: cq.CompLayout == prm.CQECompLayoutEnhanced, MiniFormat: cq.MiniFormat}, nil
}

// wire is where a sent frame goes: the cable (s, nil: nowhere) and, while
// the vport's local loopback is on (disable_*_local_lb clear, the firmware
// default), back into this port for its own multicast and broadcast and
// for unicast to its own MAC, as an eswitch vport reflects them.
func (d *Device) wire(s dpsim.Sink) dpsim.Sink {
	return func(f []byte) {
		if s != nil {
			s(f)
		}
		if len(f) < 14 {
			return
		}
		uc, mc := d.model.LocalLoopback()
		dst := [6]byte(f[:6])
		if (mc && dst[0]&1 != 0) || (uc && dst == d.cfg.Sim.MAC) {
			d.Stats.Reflected++
			d.Inject(f)
		}
	}
}

// maxFrame is the longest frame the port passes: the vport's HW MTU (L3 MTU
// + Ethernet header, one VLAN tag and FCS, prm.HWMTUOverhead).
func (d *Device) maxFrame() int {
	mtu, _, _, _, _ := d.model.Vport()
	return mtu
}

// TxStats returns the send engine counters of port queue q (zero if it
// never rang a doorbell). Call from the worker owning q, or when idle.
func (d *Device) TxStats(q int) dpsim.TxStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range d.tx {
		if e.queue == q {
			return e.q.Stats
		}
	}
	return dpsim.TxStats{}
}
