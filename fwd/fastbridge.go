package fwd

import "net"

// FastBridgeView is what an in-kernel fast path may mirror of bridge mode:
// the learned MACs that are not about to age out, and each port's untagged
// VLAN and MTU. The workers learn in place (macTable), so the control
// plane reads this on its tick rather than at a publication.
type FastBridgeView struct {
	MACs  []FastMAC
	Ports []FastBridgePort
}

// FastMAC is one learned address: frames to MAC in VLAN leave Port.
type FastMAC struct {
	VLAN uint16
	MAC  [6]byte
	Port int
}

// FastBridgePort is a port as the bridge fast path needs it.
type FastBridgePort struct {
	MAC  net.HardwareAddr
	PVID uint16 // untagged frames' VLAN (0: dropped)
	MTU  int
}

// FastBridgeGen moves whenever a MAC is learned or changes port (not when
// one is merely refreshed); ageing does not move it.
func (e *Engine) FastBridgeGen() uint64 { return e.macs.changes.Load() }

// fastBridgeMargin: a MAC this close to ageing out (at most half the
// ageing time) is left out, so frames from it reach the workers, which
// refresh it; frames the fast path forwards refresh nothing.
const fastBridgeMarginSec = 5

// FastBridge snapshots the bridge's forwarding database (bridge mode).
func (e *Engine) FastBridge() FastBridgeView {
	t := e.tables.Load()
	var v FastBridgeView
	for _, pc := range t.ports {
		v.Ports = append(v.Ports, FastBridgePort{MAC: append(net.HardwareAddr(nil), pc.mac[:]...), PVID: pc.pvid, MTU: pc.mtu})
	}
	m := e.macs
	margin := min(uint32(fastBridgeMarginSec), m.aging/2)
	now := uint32(e.cfg.Now() / 1e9)
	for i := range m.slots {
		s := &m.slots[i]
		k := s.key.Load()
		if k == 0 {
			continue
		}
		val := s.value.Load()
		age := now - uint32(val)
		if int32(age) < 0 {
			age = 0 // learned by a worker whose clock read is newer than ours
		}
		if _, tag := macHash(k); val>>32&0xffff != tag || age >= m.aging-margin {
			continue // recycled, aged or about to age (as lookup sees it)
		}
		port := int(val >> 48)
		if port >= len(t.ports) {
			continue
		}
		f := FastMAC{VLAN: uint16(k>>48) & 0xfff, Port: port}
		for j := range 6 {
			f.MAC[j] = byte(k >> (40 - 8*j))
		}
		v.MACs = append(v.MACs, f)
	}
	return v
}
