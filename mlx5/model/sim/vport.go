package sim

import (
	"encoding/binary"

	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// The NIC vport context: MTU, UC MAC list, promiscuous and local-loopback
// bits, as the driver queries and modifies them.

func (d *Device) queryVport(in, out []byte) (uint8, uint32) {
	prm.QVportMinInline.Set(out, uint64(d.cfg.VportMinInline))
	prm.QVportMTU.Set(out, uint64(d.vport.mtu))
	prm.QVportDisableUCLB.Set(out, boolTo(d.vport.disableUCLB, 1, 0))
	prm.QVportDisableMCLB.Set(out, boolTo(d.vport.disableMCLB, 1, 0))
	prm.QVportPromiscUC.Set(out, boolTo(d.vport.promiscUC, 1, 0))
	prm.QVportPromiscMC.Set(out, boolTo(d.vport.promiscMC, 1, 0))
	prm.QVportPromiscAll.Set(out, boolTo(d.vport.promiscAll, 1, 0))
	mac := d.cfg.MAC
	prm.QVportMAC47_32.Set(out, uint64(binary.BigEndian.Uint16(mac[0:])))
	prm.QVportMAC31_0.Set(out, uint64(binary.BigEndian.Uint32(mac[2:])))
	return 0, 0
}

func (d *Device) modifyVport(in, out []byte) (uint8, uint32) {
	sel := prm.D32(0x0C).Get(in)
	if sel&prm.VportFieldMTU != 0 {
		mtu := int(prm.MVportMTU.Get(in))
		if mtu < 68+prm.HWMTUOverhead || mtu > d.cfg.MaxMTU {
			return prm.StatusBadParam, synBadSize
		}
		d.vport.mtu = mtu
	}
	if prm.MVportSelDisableUCLB.Get(in) == 1 {
		if !d.cfg.DisableLocalLB {
			return prm.StatusBadParam, synBadField
		}
		d.vport.disableUCLB = prm.MVportDisableUCLB.Get(in) == 1
	}
	if prm.MVportSelDisableMCLB.Get(in) == 1 {
		if !d.cfg.DisableLocalLB {
			return prm.StatusBadParam, synBadField
		}
		d.vport.disableMCLB = prm.MVportDisableMCLB.Get(in) == 1
	}
	if sel&prm.VportFieldPromisc != 0 {
		d.vport.promiscUC = prm.MVportPromiscUC.Get(in) == 1
		d.vport.promiscMC = prm.MVportPromiscMC.Get(in) == 1
		d.vport.promiscAll = prm.MVportPromiscAll.Get(in) == 1
	}
	if sel&prm.VportFieldAddresses != 0 {
		if prm.MVportListType.Get(in) != 0 {
			return prm.StatusBadParam, synBadField // only the UC list is modelled
		}
		n := int(prm.MVportListSize.Get(in))
		if len(in) < prm.ModifyNICVportInLen+8*n {
			return prm.StatusBadInputLen, synShortInput
		}
		d.vport.ucList = nil
		for i := 0; i < n; i++ {
			var m [6]byte
			copy(m[:], in[prm.ModifyNICVportInLen+8*i+2:])
			d.vport.ucList = append(d.vport.ucList, m)
		}
	}
	return 0, 0
}

func (d *Device) queryVportState(in, out []byte) (uint8, uint32) {
	if prm.InOpMod.Get(in) != 0 {
		return prm.StatusBadParam, synBadOpMod
	}
	prm.VportStateAdmin.Set(out, boolTo(d.vport.adminUp, 1, 0))
	prm.VportStateOper.Set(out, boolTo(d.linkUp(), 1, 0))
	return 0, 0
}

// Vport reports the vport settings the driver made: the HW MTU frames are
// held to (the smaller of the vport's and the port's PMTU), promiscuous
// bits and the unicast MAC list.
func (d *Device) Vport() (mtu int, promiscUC, promiscMC, promiscAll bool, uc [][6]byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v := d.vport
	return min(v.mtu, d.pmtu), v.promiscUC, v.promiscMC, v.promiscAll, append([][6]byte(nil), v.ucList...)
}
