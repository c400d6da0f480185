package sim

import (
	"encoding/binary"

	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// Event queues: CREATE/DESTROY_EQ, the events the firmware posts (page
// requests, port changes) and the EQ doorbell.

type eqState struct {
	eqn      uint32
	base     uint64
	logSize  uint8
	uar      uint32
	bitmask  []byte // 32 bytes as in create_eq_in
	p, ci    uint32
	overruns int
	oi       bool // overrun ignore: drop events into a full EQ
}

func (eq *eqState) subscribed(t uint8) bool {
	return eq.bitmask[int(t/64)*8+7-int(t%64)/8]&(1<<(t%8)) != 0
}

func (d *Device) createEQ(in, out []byte) (uint8, uint32) {
	var st uint8
	uar := d.ref(kUAR, prm.EQCUARPage.Get(in), &st)
	if st != 0 {
		return st, synBadObject
	}
	logSize := prm.EQCLogSize.Get(in)
	if logSize > 22 || logSize < 1 {
		return prm.StatusBadParam, synBadSize
	}
	size := (1 << logSize) * prm.EQESize
	base, st, syn := d.checkBuffer(in, size, prm.EQCLogPageSize.Get(in))
	if st != 0 {
		return st, syn
	}
	o := d.objs.create(kEQ, nil, uar)
	eq := &eqState{eqn: o.id, base: base, logSize: uint8(logSize), uar: uint32(uar.id), oi: prm.EQCOI.Get(in) == 1}
	eq.bitmask = append([]byte(nil), prm.EQEventBitmask.Slice(in)...)
	o.data = eq
	d.eqs[o.id] = eq
	prm.CreateEQOutEQN.Set(out, uint64(o.id))
	return 0, 0
}

func (d *Device) destroyEQ(in, out []byte) (uint8, uint32) {
	o := d.objs.get(kEQ, uint32(prm.DestroyEQInEQN.Get(in)))
	if o == nil {
		return prm.StatusBadResource, synBadObject
	}
	if !d.objs.destroy(o) {
		return prm.StatusResourceBusy, synBusy
	}
	delete(d.eqs, o.id)
	return 0, 0
}

func (d *Device) pageRequestEQ() *eqState {
	for _, eq := range d.eqs {
		if eq.subscribed(prm.EventPageRequest) {
			return eq
		}
	}
	return nil
}

func (d *Device) postPageRequest(eq *eqState, n int32) {
	var data [8]byte
	binary.BigEndian.PutUint16(data[2:], 0) // func_id
	binary.BigEndian.PutUint32(data[4:], uint32(n))
	d.postEQE(eq, prm.EventPageRequest, 0, data[:])
}

// PostPageRequest makes the firmware ask for n more pages (n > 0) or give
// back -n pages (n < 0) through the page-request EQ, as at run time.
func (d *Device) PostPageRequest(n int32) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	eq := d.pageRequestEQ()
	if eq == nil {
		return false
	}
	if n > 0 {
		d.runtimeOwed += int(n)
	}
	d.postPageRequest(eq, n)
	return true
}

// postEQE writes one EQE, owner byte last (kernel lib/eq.h next_eqe_sw reads it first).
func (d *Device) postEQE(eq *eqState, typ, sub uint8, data []byte) {
	n := uint32(1) << eq.logSize
	if eq.p-eq.ci >= n {
		eq.overruns++
		d.stats.EQOverruns++
		if !eq.oi {
			// Without oi an overrun is an EQ error; on the async EQ the
			// function reports it in the health buffer (syndrome 0xC,
			// "async EQ overrun", kernel health.c) and stops.
			d.violations.EQOverrun++
			d.fatal = 0xC
		}
		return
	}
	e, err := d.mem.Slice(eq.base+uint64(eq.p&(n-1))*prm.EQESize, prm.EQESize)
	if err != nil {
		return
	}
	clear(e[:prm.EQEOwnerOffset])
	e[prm.EQEType] = typ
	e[prm.EQESubType] = sub
	copy(e[prm.EQEData:prm.EQEData+28], data)
	storeEQEOwner(e, uint8(eq.p>>eq.logSize)&1)
	eq.p++
}

func (d *Device) eqDoorbell(uar uint32, v uint32) {
	eq := d.eqs[v>>24]
	if eq == nil || eq.uar != uar {
		return
	}
	eq.ci = v & 0xFFFFFF
}
