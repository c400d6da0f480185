package sim

import (
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// The firmware object table (ids, references, destruction order) and the
// checks every object-creating command shares: UAR, mkey, buffer and
// doorbell-record addresses.

type kind uint8

const (
	kUAR kind = iota
	kPD
	kTD
	kMkey
	kEQ
	kCQ
	kRQ
	kSQ
	kTIS
	kRQT
	kTIR
	kFT
	kFG
	kFTE
	numKinds
)

var kindNames = [numKinds]string{"UAR", "PD", "TD", "MKEY", "EQ", "CQ", "RQ", "SQ", "TIS", "RQT", "TIR", "FLOW_TABLE", "FLOW_GROUP", "FTE"}

// object is one firmware object. uses are the objects it references; users
// counts references to it, and a referenced object cannot be destroyed.
type object struct {
	kind  kind
	id    uint32
	uses  []*object
	users int
	data  any
}

func (o *object) String() string { return fmt.Sprintf("%s %#x", kindNames[o.kind], o.id) }

type objects struct {
	next [numKinds]uint32
	tab  [numKinds]map[uint32]*object
}

func newObjects() objects {
	var o objects
	for k := range o.tab {
		o.tab[k] = map[uint32]*object{}
		// Ids start at a non-zero, kind-specific value so a driver that
		// mixes up object kinds hits "no such object".
		o.next[k] = uint32(k+1) << 4
	}
	o.next[kEQ] = 1 // 8-bit EQ numbers
	o.next[kUAR] = 1
	return o
}

func (o *objects) create(k kind, data any, uses ...*object) *object {
	id := o.next[k]
	o.next[k]++
	if k == kEQ {
		id &= 0xFF
	} else {
		id &= 0xFFFFFF
	}
	obj := &object{kind: k, id: id, uses: uses, data: data}
	for _, u := range uses {
		u.users++
	}
	o.tab[k][id] = obj
	return obj
}

func (o *objects) get(k kind, id uint32) *object { return o.tab[k][id] }

func (o *objects) destroy(obj *object) bool {
	if obj.users > 0 {
		return false
	}
	for _, u := range obj.uses {
		u.users--
	}
	delete(o.tab[obj.kind], obj.id)
	return true
}

func (o *objects) all() []*object {
	var l []*object
	for k := range o.tab {
		for _, obj := range o.tab[k] {
			l = append(l, obj)
		}
	}
	sort.Slice(l, func(i, j int) bool {
		if l[i].kind != l[j].kind {
			return l[i].kind < l[j].kind
		}
		return l[i].id < l[j].id
	})
	return l
}

// Objects lists the live firmware objects ("CQ 0x60"), for leak checks.
func (d *Device) Objects() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var s []string
	for _, o := range d.objs.all() {
		s = append(s, o.String())
	}
	return s
}

// LeakedAtTeardown lists objects that were still alive at TEARDOWN_HCA.
func (d *Device) LeakedAtTeardown() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.leakLog...)
}

func allocator(k kind) func(*Device, []byte, []byte) (uint8, uint32) {
	return func(d *Device, in, out []byte) (uint8, uint32) {
		prm.OutObjID.Set(out, uint64(d.objs.create(k, nil).id))
		return 0, 0
	}
}

func destroyer(k kind) func(*Device, []byte, []byte) (uint8, uint32) {
	return func(d *Device, in, out []byte) (uint8, uint32) {
		obj := d.objs.get(k, uint32(prm.InObjID.Get(in)))
		if obj == nil {
			return prm.StatusBadResource, synBadObject
		}
		if !d.objs.destroy(obj) {
			return prm.StatusResourceBusy, synBusy
		}
		return 0, 0
	}
}

// ref resolves a referenced object or fails the command with BAD_RES.
func (d *Device) ref(k kind, id uint64, status *uint8) *object {
	o := d.objs.get(k, uint32(id))
	if o == nil && *status == 0 {
		*status = prm.StatusBadResource
	}
	return o
}

func (d *Device) allocUAR(in, out []byte) (uint8, uint32) {
	if len(d.objs.tab[kUAR]) >= d.cfg.NumUARs-1 {
		return prm.StatusNoResources, synBadSize
	}
	prm.OutObjID.Set(out, uint64(d.objs.create(kUAR, nil).id))
	return 0, 0
}

func (d *Device) createMkey(in, out []byte) (uint8, uint32) {
	var st uint8
	pd := d.ref(kPD, prm.MkeyPD.Get(in), &st)
	if st != 0 {
		return st, synBadObject
	}
	if prm.MkeyAccessMode1_0.Get(in) != prm.MkeyAccessPA || prm.MkeyAccessMode4_2.Get(in) != 0 ||
		prm.MkeyLength64.Get(in) != 1 || prm.MkeyQPN.Get(in) != 0xFFFFFF || prm.MkeyFree.Get(in) != 0 {
		// Only the physical-address mkey (mkc.access_mode PA, length64) is modelled.
		return prm.StatusBadParam, synBadField
	}
	o := d.objs.create(kMkey, uint8(prm.Mkey7_0.Get(in)), pd)
	prm.OutObjID.Set(out, uint64(o.id))
	return 0, 0
}

// Mkey is the lkey of a live mkey: index << 8 | variant byte.
func (d *Device) lkeyValid(lkey uint32) bool {
	o := d.objs.get(kMkey, lkey>>8)
	return o != nil && o.data.(uint8) == uint8(lkey)
}

// LKeyValid reports whether lkey names a live PA mkey (for the data-path model).
func (d *Device) LKeyValid(lkey uint32) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lkeyValid(lkey)
}

// checkBuffer validates a queue buffer given by pas[] at prm.PASOffset: the
// buffer of size bytes in pages of 4 KiB << logPage must be fully mapped,
// the input must carry every pas entry, and each entry must be aligned to
// the page size it claims (the device translates an address as page base +
// offset, so a misaligned entry points it at the wrong memory). The model
// also needs the pages IOVA-contiguous, as every buffer the driver maps is.
func (d *Device) checkBuffer(in []byte, size int, logPage uint64) (uint64, uint8, uint32) {
	if logPage > 30 {
		return 0, prm.StatusBadParam, synBadSize
	}
	page := prm.AdapterPageSize << logPage
	npas := (size + page - 1) / page
	if len(in) < prm.PASOffset+8*npas {
		return 0, prm.StatusBadInputLen, synShortInput
	}
	var first uint64
	for i := 0; i < npas; i++ {
		pa := binary.BigEndian.Uint64(in[prm.PASOffset+8*i:])
		if i == 0 {
			first = pa
		}
		if pa%uint64(page) != 0 || pa != first+uint64(i*page) {
			return 0, prm.StatusBadParam, synBadField
		}
		if _, err := d.mem.Slice(pa, min(page, size-i*page)); err != nil {
			return 0, prm.StatusBadParam, synUnmapped
		}
	}
	return first, 0, 0
}

func (d *Device) checkDBR(addr uint64, n int) (uint8, uint32) {
	if addr%8 != 0 {
		return prm.StatusBadParam, synBadField
	}
	if _, err := d.mem.Slice(addr, n); err != nil {
		return prm.StatusBadParam, synUnmapped
	}
	return 0, 0
}
