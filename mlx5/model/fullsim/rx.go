package fullsim

import (
	"encoding/binary"
	"fmt"

	"github.com/ovfwd/ovfwd/mlx5/dp"
	"github.com/ovfwd/ovfwd/mlx5/model/dpsim"
	"github.com/ovfwd/ovfwd/mlx5/model/sim"
	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// rxEngine is the receive engine serving one RQ of the command model.
type rxEngine struct {
	rqn   uint32
	info  sim.RQInfo
	cqn   uint32
	cqb   uint64 // CQ ring IOVA, to notice a recreated CQ
	gen   uint64
	q     *dpsim.RxQueue
	batch [][]byte // frames of the current InjectBatch for this RQ
}

// route is a cached steering decision for one (ethertype, IP protocol):
// the RQ engines behind the TIR (one for a direct TIR, the RQT's buckets for
// an RSS TIR) and the TIR's hash.
type route struct {
	valid     bool
	gen       uint64
	ethertype uint16
	proto     uint8
	buckets   []*rxEngine // nil entries: RQ not servable
	hashed    bool
	ipv6, udp bool
	fields    uint32
	key       [prm.ToeplitzKeySize + 8]byte // zero padded for the sliding window
}

// vportFilter is the vport context as last read from the command model.
type vportFilter struct {
	gen                   uint64
	valid                 bool
	maxFrame              int
	promiscUC, promiscAll bool
	promiscMC             bool
	uc                    [][6]byte
}

// Inject receives one frame from the wire.
func (d *Device) Inject(frame []byte) {
	var one [1][]byte
	one[0] = frame
	d.InjectBatch(one[:])
}

// InjectBatch receives frames from the wire, in order. Frames that steer
// to the same RQ are handed to its engine together (so it can compress
// their CQEs).
func (d *Device) InjectBatch(frames [][]byte) {
	d.mu.Lock()
	gen := d.gen.Load()
	if !d.vport.valid || d.vport.gen != gen {
		d.refreshVport(gen)
	}
	for _, f := range frames {
		if !d.vport.accepts(f) {
			d.Stats.Filtered++
			continue
		}
		e := d.steer(f, gen)
		if e == nil {
			continue
		}
		e.batch = append(e.batch, f)
	}
	for _, e := range d.rx {
		if len(e.batch) > 0 {
			e.q.InjectBatch(e.batch)
			clear(e.batch)
			e.batch = e.batch[:0]
		}
	}
	d.mu.Unlock()
}

func (d *Device) refreshVport(gen uint64) {
	mtu, uc, mc, all, list := d.model.Vport()
	d.vport = vportFilter{gen: gen, valid: true, maxFrame: mtu, promiscUC: uc, promiscMC: mc, promiscAll: all, uc: list}
	for _, e := range d.rx {
		e.q.MaxFrame = mtu
	}
}

// accepts is the vport's destination MAC filter: broadcast, a unicast
// address in the UC list, or whatever the promiscuous bits open. No
// multicast list is modelled, so multicast needs promiscuous MC or all.
func (v *vportFilter) accepts(f []byte) bool {
	if len(f) < 14 || v.promiscAll {
		return len(f) >= 14
	}
	dst := [6]byte(f[0:6])
	if dst == [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff} {
		return true
	}
	if dst[0]&1 != 0 {
		return v.promiscMC
	}
	if v.promiscUC {
		return true
	}
	for _, m := range v.uc {
		if m == dst {
			return true
		}
	}
	return false
}

// steer picks the RQ engine for f. Called with d.mu held.
func (d *Device) steer(f []byte, gen uint64) *rxEngine {
	et, proto, l3 := headers(f)
	var r *route
	for i := range d.routes {
		if c := &d.routes[i]; c.valid && c.ethertype == et && c.proto == proto {
			r = c
			break
		}
	}
	if r == nil || r.gen != gen {
		if r == nil {
			r = &d.routes[d.victim]
			d.victim = (d.victim + 1) % len(d.routes)
		}
		d.resolve(r, et, proto, gen)
	}
	if len(r.buckets) == 0 {
		d.Stats.NoRoute++
		return nil
	}
	e := r.buckets[0]
	if r.hashed {
		e = r.buckets[r.hash(f, l3)%uint32(len(r.buckets))]
	}
	if e == nil {
		d.Stats.NotReady++
	}
	return e
}

// resolve fills r from the command model: flow table → TIR → RQT → RQs.
func (d *Device) resolve(r *route, et uint16, proto uint8, gen uint64) {
	*r = route{valid: true, gen: gen, ethertype: et, proto: proto, buckets: r.buckets[:0]}
	tirn, ok := d.model.Steer(et, proto)
	if !ok {
		return
	}
	tir, ok := d.model.TIR(tirn)
	if !ok {
		return
	}
	if !tir.Indirect {
		r.buckets = append(r.buckets, d.rxBinding(tir.Target, gen))
		return
	}
	rqns, ok := d.model.RQT(tir.Target)
	if !ok {
		return
	}
	r.hashed, r.ipv6, r.udp, r.fields = true, tir.IPv6, tir.UDP, tir.Fields
	copy(r.key[:], tir.ToeplitzKey)
	for _, rqn := range rqns {
		r.buckets = append(r.buckets, d.rxBinding(rqn, gen))
	}
}

// rxBinding finds or creates the engine of rqn; nil when the RQ cannot be
// served (missing, not RDY, or a WQ type the engines do not model).
func (d *Device) rxBinding(rqn uint32, gen uint64) *rxEngine {
	info, ok := d.model.RQ(rqn)
	if !ok || info.State != prm.QueueStateRDY {
		return nil
	}
	cq, ok := d.model.CQ(info.CQN)
	if !ok {
		return nil
	}
	for _, e := range d.rx {
		if e.rqn == rqn {
			if e.info.Base == info.Base && e.info.DBR == info.DBR && e.cqn == cq.CQN && e.cqb == cq.Base {
				e.gen, e.info = gen, info
				return e
			}
			e.rqn = 0 // recreated under the same number: a fresh engine
		}
	}
	if info.WQType != prm.WQTypeCyclicStridingRQ || info.TwoByteShift || info.LogStrides < 0 {
		d.fail(fmt.Errorf("fullsim: RQ %#x: wq_type %d, two-byte shift %v: only the cyclic striding RQ is modelled",
			rqn, info.WQType, info.TwoByteShift))
		return nil
	}
	cqm, err := d.cqMem(cq)
	if err != nil {
		d.fail(err)
		return nil
	}
	ring, err := d.mem.Slice(info.Base, (1<<info.LogWQSz)*prm.StridingRQWQEStride)
	if err != nil {
		d.fail(err)
		return nil
	}
	dbr, err := d.mem.Slice(info.DBR, 4)
	if err != nil {
		d.fail(err)
		return nil
	}
	q := dpsim.NewRxQueue(d.view, cqm, &dp.RQMem{RQN: rqn, WQType: info.WQType, Ring: ring, LogWQEs: info.LogWQSz,
		LogStrides: uint8(info.LogStrides), LogStrideSize: info.LogStrideSize, DBRec: dbr})
	q.Flush = d.cfg.Flush
	q.Strip = !info.VSD
	q.EndPad = info.EndPad
	q.MaxFrame = d.vport.maxFrame
	e := &rxEngine{rqn: rqn, info: info, cqn: cq.CQN, cqb: cq.Base, gen: gen, q: q}
	d.rx = append(d.rx, e)
	return e
}

// headers returns the ethertype (past one VLAN tag), the IP protocol (0 for
// non-IP) and the L3 offset: the two fields the classifier matches on.
func headers(f []byte) (et uint16, proto uint8, l3 int) {
	if len(f) < 14 {
		return 0, 0, 0
	}
	et, l3 = binary.BigEndian.Uint16(f[12:]), 14
	if et == 0x8100 && len(f) >= 18 {
		et, l3 = binary.BigEndian.Uint16(f[16:]), 18
	}
	switch {
	case et == 0x0800 && len(f) >= l3+20:
		proto = f[l3+9]
	case et == 0x86DD && len(f) >= l3+40:
		proto = f[l3+6]
	}
	return et, proto, l3
}

// hash is the TIR's Toeplitz hash over the selected fields, in the order
// source address, destination address, source port, destination port.
func (r *route) hash(f []byte, l3 int) uint32 {
	var in [36]byte
	n := 0
	alen, src, l4 := 4, l3+12, l3+20
	if r.ipv6 {
		alen, src, l4 = 16, l3+8, l3+40
	}
	if len(f) < l4 {
		return 0
	}
	if r.fields&prm.HashSrcIP != 0 {
		n += copy(in[n:], f[src:src+alen])
	}
	if r.fields&prm.HashDstIP != 0 {
		n += copy(in[n:], f[src+alen:src+2*alen])
	}
	if !r.ipv6 {
		l4 = l3 + int(f[l3]&15)*4
	}
	if r.fields&(prm.HashL4SPort|prm.HashL4DPort) != 0 && len(f) >= l4+4 {
		if r.fields&prm.HashL4SPort != 0 {
			n += copy(in[n:], f[l4:l4+2])
		}
		if r.fields&prm.HashL4DPort != 0 {
			n += copy(in[n:], f[l4+2:l4+4])
		}
	}
	return toeplitz(&r.key, in[:n])
}

// toeplitz hashes in with key: for every set input bit i (MSB first), XOR
// in the 32 key bits starting at bit i.
func toeplitz(key *[prm.ToeplitzKeySize + 8]byte, in []byte) uint32 {
	var h uint32
	for j, b := range in {
		w := binary.BigEndian.Uint64(key[j : j+8])
		for i := 0; i < 8; i++ {
			if b&(0x80>>i) != 0 {
				h ^= uint32(w << i >> 32)
			}
		}
	}
	return h
}

// RxStats returns the receive engine counters of port queue q's RQ (zero if
// nothing was steered to it yet).
func (d *Device) RxStats(q int) dpsim.RxStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range d.rx {
		if q < len(d.rqns) && e.rqn == d.rqns[q] {
			return e.q.Stats
		}
	}
	return dpsim.RxStats{}
}
