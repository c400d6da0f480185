package fwd

import (
	"encoding/binary"

	"github.com/ovfwd/ovfwd/fwd/csum"
)

type icmpErr uint8

const (
	errNoRoute         icmpErr = iota // ICMP net unreachable / ICMPv6 no route
	errTTL                            // time exceeded in transit / hop limit exceeded
	errTooBig                         // fragmentation needed (RFC 1191) / packet too big (RFC 8201)
	errHostUnreach                    // the next hop did not answer ARP / ND (RFC 1812 §4.3.3.1, RFC 4443 §3.1)
	errAdminProhibited                // an access rule refused it (RFC 1812 §5.2.7.1 code 13, RFC 4443 §3.1 code 1)
)

// icmpError sends the ICMP or ICMPv6 error kind about p back to p's
// source, routed like any packet the appliance originates. It never sends
// one about an ICMP error, a later fragment, a multicast or broadcast
// packet, or a packet of our own (RFC 1812 §4.3.2.7, RFC 4443 §2.4 (e)),
// and only when the worker's token bucket has a token.
func (w *Worker) icmpError(t *tables, p *Packet, kind icmpErr, mtu int, how uint8) {
	if how&rOrigin != 0 {
		return
	}
	d := p.Data()
	l3 := d[p.L3Off:]
	v4 := p.Flags&FlagIPv4 != 0
	if p.Flags&FlagL3Only == 0 && d[0]&1 != 0 {
		return // link-layer broadcast or multicast
	}
	if v4 {
		if binary.BigEndian.Uint16(l3[6:])&ipv4FragMask != 0 || l3[12] == 0 || l3[12] >= 224 || l3[16] >= 224 {
			return
		}
		if p.Flags&FlagICMP != 0 {
			switch d[p.L4Off] {
			case icmpUnreachable, icmpSourceQuench, icmpRedirect, icmpTimeExceeded, icmpParamProblem:
				return
			}
		}
	} else {
		if l3[8] == 0xff || [16]byte(l3[8:24]) == [16]byte{} || l3[24] == 0xff && kind != errTooBig {
			return
		}
		if p.Flags&FlagICMP != 0 && d[p.L4Off] < icmp6EchoRequest {
			return
		}
	}
	if !w.takeICMPToken() {
		return
	}
	// Our source address: the ingress port's, else any port's.
	var src4 [4]byte
	var src6 [16]byte
	found := false
	for i := -1; i < len(t.ports) && !found; i++ {
		pc := &t.ports[p.InPort]
		if i >= 0 {
			pc = &t.ports[i]
		}
		if v4 {
			src4, found = pc.src4([4]byte(l3[12:16]))
		} else {
			src6, found = pc.src6([16]byte(l3[8:24]))
		}
	}
	if !found {
		return
	}
	a := w.alloc(int(p.InPort))
	if a == nil {
		return
	}
	w.tmpICMP = *a
	e := &w.tmpICMP
	b := e.Buf[e.Off:]
	var n int
	if v4 {
		q := min(len(l3), icmp4MaxErrLen-ipv4MinHdrLen-icmpHdrLen, len(b)-ipv4MinHdrLen-icmpHdrLen)
		n = ipv4MinHdrLen + icmpHdrLen + q
		ip, ic := b[:ipv4MinHdrLen], b[ipv4MinHdrLen:n]
		ip[0], ip[1] = 0x45, 0
		binary.BigEndian.PutUint16(ip[2:], uint16(n))
		clear(ip[4:8])
		ip[8], ip[9] = defaultHop, protoICMP
		clear(ip[10:12])
		copy(ip[12:16], src4[:])
		copy(ip[16:20], l3[12:16])
		binary.BigEndian.PutUint16(ip[10:], csum.Checksum(ip))
		clear(ic[:icmpHdrLen])
		switch kind {
		case errNoRoute:
			ic[0], ic[1] = icmpUnreachable, icmpCodeNet
		case errTTL:
			ic[0], ic[1] = icmpTimeExceeded, icmpCodeTTL
		case errTooBig:
			ic[0], ic[1] = icmpUnreachable, icmpCodeFragNeed
			binary.BigEndian.PutUint16(ic[6:], uint16(mtu))
		case errHostUnreach:
			ic[0], ic[1] = icmpUnreachable, icmpCodeHost
		case errAdminProhibited:
			ic[0], ic[1] = icmpUnreachable, icmpCodeAdmin
		}
		copy(ic[icmpHdrLen:], l3[:q])
		binary.BigEndian.PutUint16(ic[2:], csum.Checksum(ic))
		e.Flags = FlagL3Only | FlagParsed | FlagIPv4 | FlagICMP
		e.L4Off = ipv4MinHdrLen
	} else {
		q := min(len(l3), ipv6MinMTU-ipv6HdrLen-icmpHdrLen, len(b)-ipv6HdrLen-icmpHdrLen)
		n = ipv6HdrLen + icmpHdrLen + q
		ip, ic := b[:ipv6HdrLen], b[ipv6HdrLen:n]
		binary.BigEndian.PutUint32(ip, 6<<28)
		binary.BigEndian.PutUint16(ip[4:], uint16(n-ipv6HdrLen))
		ip[6], ip[7] = protoICMPv6, defaultHop
		copy(ip[8:24], src6[:])
		copy(ip[24:40], l3[8:24])
		clear(ic[:icmpHdrLen])
		switch kind {
		case errNoRoute:
			ic[0], ic[1] = icmp6Unreachable, icmp6CodeNoRoute
		case errTTL:
			ic[0], ic[1] = icmp6TimeExceeded, icmp6CodeHopLimit
		case errTooBig:
			ic[0] = icmp6PacketTooBig
			binary.BigEndian.PutUint32(ic[4:], uint32(mtu))
		case errHostUnreach:
			ic[0], ic[1] = icmp6Unreachable, icmp6CodeAddr
		case errAdminProhibited:
			ic[0], ic[1] = icmp6Unreachable, icmp6CodeAdmin
		}
		copy(ic[icmpHdrLen:], l3[:q])
		binary.BigEndian.PutUint16(ic[2:], csum.Fold(csum.Sum(csum.Pseudo(ip[8:24], ip[24:40], protoICMPv6, len(ic)), ic)))
		e.Flags = FlagL3Only | FlagParsed | FlagIPv6 | FlagICMP
		e.L4Off = ipv6HdrLen
	}
	e.Len, e.L3Off = uint16(n), 0
	w.cnt[cICMPSent]++
	w.routeIP(t, e, rOrigin|how&rNoTunnel)
}
