package nat

import (
	"encoding/binary"
	"testing"

	"github.com/ovfwd/ovfwd/fwd/csum"
)

// checkable reports whether p's checksums are all valid (so they must
// still be after a translation).
func checkable(p []byte) bool {
	if csum.Checksum(p[:20]) != 0 {
		return false
	}
	if binary.BigEndian.Uint16(p[6:])&(ipv4FlagMF|ipv4FragMask) != 0 {
		return true
	}
	ihl := int(p[0]&0x0f) * 4
	l := p[ihl:]
	switch p[9] {
	case protoTCP, protoUDP:
		if ihl != 20 {
			return false
		}
		if p[9] == protoUDP && len(l) >= 8 && binary.BigEndian.Uint16(l[6:]) == 0 {
			return true
		}
		return ^csum.Fold16(pseudo(p)+csum.Sum(0, l)) == 0
	case protoICMP:
		return csum.Checksum(l) == 0
	}
	return true
}

// FuzzTranslate feeds arbitrary datagrams through Out and In of a table
// with live sessions: never a panic, and a translated packet whose
// checksums were valid has valid checksums. A twin table takes the
// outbound packet the worker's way (Prefetch, Touch, OutHint and its fast
// path) and must decide and translate exactly as Out.
func FuzzTranslate(f *testing.F) {
	f.Add(ipPacket(inA, remote, protoTCP, tcp(40000, 80, tcpSYN, "x")))
	f.Add(ipPacket(inA, remote, protoUDP, udp(5000, 53, "x")))
	f.Add(ipPacket(inA, remote, protoUDP, udp(5000, 53, "a longer datagram")))
	f.Add(ipPacket(inA, remote, protoTCP, tcp(40000, 80, tcpFIN, "")))
	f.Add(ipPacket(inA, remote, protoICMP, echo(icmpEchoRequest, 9, 1)))
	f.Add(ipPacket(remote, out1, protoUDP, udp(53, 1024, "y")))
	f.Add(ipPacket(remote, out1, protoICMP, echo(icmpEchoReply, 1024, 1)))
	f.Add(icmpError(remote, out1, icmpUnreachable, 3, ipPacket(out1, remote, protoUDP, udp(1024, 53, "x"))))
	f.Add(icmpError(inA, remote, icmpUnreachable, 3, ipPacket(remote, inA, protoUDP, udp(53, 5000, "x"))))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := testConfig()
		c.EndpointIndependentFiltering = len(data)%2 == 0
		tb, twin := newTestTable(t, c), newTestTable(t, c)
		for _, x := range []*Table{tb, twin} {
			mustOut(t, x, ipPacket(inA, remote, protoUDP, udp(5000, 53, "x")))
			mustOut(t, x, ipPacket(inA, remote, protoICMP, echo(icmpEchoRequest, 9, 1)))
			mustOut(t, x, ipPacket(inA, remote, protoTCP, tcp(40000, 80, tcpSYN, "x")))
		}
		if len(data) < 20 || data[0]>>4 != 4 {
			return
		}
		ihl := int(data[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(data[2:]))
		if ihl < 20 || total < ihl || total > len(data) {
			return
		}
		p := data[:total]
		l4 := ihl
		if binary.BigEndian.Uint16(p[6:])&ipv4FragMask != 0 {
			l4 = 0
		}
		ok := checkable(p)
		for _, dir := range []int{0, 1} {
			q := append([]byte(nil), p...)
			var v Verdict
			if dir == 0 {
				v, _ = tb.Out(q, l4, 1)
				h := append([]byte(nil), p...)
				hint := []uint64{twin.Prefetch(h, l4)}
				twin.Touch(hint)
				if hv, _ := twin.OutHint(h, l4, 1, hint[0]); hv != v || string(h) != string(q) {
					t.Fatalf("hinted path: %v, Out: %v\nin   %x\nOut  %x\nhint %x", hv, v, p, q, h)
				}
			} else {
				v, _ = tb.In(q, l4)
			}
			if v == Done && ok && !checkable(q) {
				t.Fatalf("dir %d: checksums wrong after translation\nin  %x\nout %x", dir, p, q)
			}
			if v != Done && v != Handoff && string(q) != string(p) {
				t.Fatalf("dir %d: verdict %v but the packet changed", dir, v)
			}
		}
		tb.Refresh(tb.k, 2000e9)
		tb.Publish()
	})
}
