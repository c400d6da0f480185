package fwd

import "encoding/binary"

// bridgeFrame is bridge mode's entry point: learn the source, forward to
// the port the destination was learned on, or flood the VLAN.
//
// Frames carry at most one 802.1Q tag here; 802.1ad (QinQ) frames are not
// bridged (DropUnsupported). A priority tag (VID 0) means the port's PVID.
func (w *Worker) bridgeFrame(t *tables, p *Packet) {
	d := p.Data()
	if p.Flags&FlagL3Only != 0 {
		w.drop(p, DropUnsupported) // nothing to bridge without a link layer
		return
	}
	if len(d) < ethHdrLen {
		w.drop(p, DropMalformed)
		return
	}
	pc := &t.ports[p.InPort]
	p.Flags &^= FlagVLAN | FlagQinQ | FlagParsed
	vlan := pc.pvid
	switch binary.BigEndian.Uint16(d[12:]) {
	case etherTypeVLAN:
		if len(d) < ethHdrLen+vlanTagLen {
			w.drop(p, DropMalformed)
			return
		}
		p.Flags |= FlagVLAN
		if v := binary.BigEndian.Uint16(d[14:]) & 0x0fff; v != 0 {
			if !pc.isMember(v) {
				w.drop(p, DropVLAN)
				return
			}
			vlan = v
		}
	case etherTypeQinQ:
		w.drop(p, DropUnsupported)
		return
	}
	if vlan == 0 {
		w.drop(p, DropVLAN)
		return
	}
	p.VLAN = vlan
	if d[6]&1 != 0 {
		w.drop(p, DropMalformed) // a group address is never a source
		return
	}
	if !w.e.macs.learn(macKey(vlan, d[6:12]), p.InPort, w.nowSec) {
		w.cnt[cMACTableFull]++
	}
	if d[0]&1 == 0 {
		if out, ok := w.e.macs.lookup(macKey(vlan, d[0:6]), w.nowSec); ok {
			if out == p.InPort {
				w.drop(p, DropLoop)
				return
			}
			w.bridgeOut(t, p, int(out), vlan)
			return
		}
	}
	w.flood(t, p, vlan)
}

func carries(pc *portConf, vlan uint16) bool { return pc.pvid == vlan || pc.isMember(vlan) }

// flood sends p to every other port of its VLAN: copies to all but the
// last, the original to the last.
func (w *Worker) flood(t *tables, p *Packet, vlan uint16) {
	w.cnt[cFloods]++
	last := -1
	for j := range t.ports {
		if j == int(p.InPort) || !carries(&t.ports[j], vlan) {
			continue
		}
		if last >= 0 {
			w.floodCopy(t, p, last, vlan)
		}
		last = j
	}
	if last < 0 {
		w.drop(p, DropLoop) // the ingress port is the VLAN's only member
		return
	}
	w.bridgeOut(t, p, last, vlan)
}

func (w *Worker) floodCopy(t *tables, p *Packet, out int, vlan uint16) {
	a := w.alloc(out)
	if a == nil {
		w.cnt[cDrops+int(DropTxFull)]++
		return
	}
	w.tmpFlood = *a
	c := &w.tmpFlood
	if int(c.Off)+int(p.Len) > len(c.Buf) || c.Off < vlanTagLen {
		w.release(c)
		w.cnt[cDrops+int(DropTxFull)]++
		return
	}
	c.Len = uint16(copy(c.Buf[c.Off:], p.Data()))
	c.Flags, c.VLAN = p.Flags, p.VLAN
	w.bridgeOut(t, c, out, vlan)
}

// bridgeOut tags or untags p for port out and queues it.
func (w *Worker) bridgeOut(t *tables, p *Packet, out int, vlan uint16) {
	pc := &t.ports[out]
	if !carries(pc, vlan) {
		w.drop(p, DropVLAN)
		return
	}
	tag := vlan
	if pc.pvid == vlan {
		tag = 0
	}
	if !setTag(p, tag) {
		w.drop(p, DropMalformed)
		return
	}
	if int(p.Len)-ethHdrLen-vlanTagLen > pc.mtu {
		w.drop(p, DropTooBig)
		return
	}
	w.send(p, out)
}

// setTag makes p carry 802.1Q tag vlan, or no tag when vlan is 0, moving
// only the 12 address bytes (the payload stays where it is).
func setTag(p *Packet, vlan uint16) bool {
	has := p.Flags&FlagVLAN != 0
	switch {
	case has && vlan != 0:
		d := p.Data()
		binary.BigEndian.PutUint16(d[14:], binary.BigEndian.Uint16(d[14:])&0xf000|vlan)
	case has:
		d := p.Data()
		copy(d[vlanTagLen:vlanTagLen+12], d[:12])
		p.Pull(vlanTagLen)
		p.Flags &^= FlagVLAN
	case vlan != 0:
		if p.Off < vlanTagLen {
			return false
		}
		p.Push(vlanTagLen)
		d := p.Data()
		copy(d[:12], d[vlanTagLen:vlanTagLen+12])
		binary.BigEndian.PutUint16(d[12:], etherTypeVLAN)
		binary.BigEndian.PutUint16(d[14:], vlan)
		p.Flags |= FlagVLAN
	}
	return true
}
