package status

import (
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// OpenVPN's status formats, as openvpn 2.6 writes them to its status file
// and prints for the management interface's "status N" (multi.c
// multi_print_status): version 1 is the "OpenVPN CLIENT LIST" layout,
// version 2 the same records as comma-separated HEADER/CLIENT_LIST/
// ROUTING_TABLE/GLOBAL_STATS lines, version 3 version 2 with tabs.
// Times are local (otime.c time_string), as openvpn prints them.

// Title is what openvpn calls its title_string, for the TITLE line and the
// management "version" command. Tools split it on spaces and read the
// fourth word of "OpenVPN Version: OpenVPN 2.6 …" as the version, so it
// names the protocol level ovfwd speaks first.
func Title(version string) string {
	return "OpenVPN 2.6 (ovfwd " + version + ") " + runtime.GOARCH + "-linux [AEAD]"
}

// OpenVPNTime is otime.c time_string: "2006-01-02 15:04:05", local time.
func OpenVPNTime(t time.Time) string { return t.Local().Format(time.DateTime) }

// RealAddress is a client's UDP address as openvpn prints it
// (mroute.c mroute_addr_print_ex): "ip:port" for IPv4 (also when mapped
// into IPv6), the bare address for IPv6, whose port "is too ambiguous".
func RealAddress(real string) string {
	ap, err := netip.ParseAddrPort(real)
	if err != nil {
		return real
	}
	if a := ap.Addr().Unmap(); a.Is4() {
		return a.String() + ":" + strconv.Itoa(int(ap.Port()))
	}
	return ap.Addr().WithZone("").String()
}

// undef is tls_common_name / tls_username for a client without one.
func undef(s string) string {
	if s == "" {
		return "UNDEF"
	}
	return s
}

// peerAddrs splits a peer's tunnel addresses by family.
func peerAddrs(p *VPNPeer) (v4, v6 string) {
	for _, a := range p.Addrs {
		ip, err := netip.ParseAddr(a)
		switch {
		case err != nil:
		case ip.Is4() && v4 == "":
			v4 = a
		case ip.Is6() && v6 == "":
			v6 = a
		}
	}
	return v4, v6
}

// lastRef is a route's last reference: the client's last packet, or its
// connection when it has sent none yet.
func lastRef(p *VPNPeer) time.Time {
	if p.LastSeen.IsZero() {
		return p.Since
	}
	return p.LastSeen
}

// WriteOpenVPN appends s in openvpn's status format version (1, 2 or 3) to
// b, one line per record, each ended by eol ("\n" for the status file,
// "\r\n" for the management interface). now stamps the Updated/TIME line.
// Another version appends openvpn's error line.
func WriteOpenVPN(b *strings.Builder, s *Snapshot, version int, now time.Time, eol string) {
	var peers []VPNPeer
	if s.VPN != nil {
		peers = s.VPN.Peers
	}
	line := func(fields ...string) {
		for i, f := range fields {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(f)
		}
		b.WriteString(eol)
	}
	u := func(n uint64) string { return strconv.FormatUint(n, 10) }
	switch version {
	case 1:
		line("OpenVPN CLIENT LIST")
		line("Updated", OpenVPNTime(now))
		line("Common Name", "Real Address", "Bytes Received", "Bytes Sent", "Connected Since")
		for i := range peers {
			p := &peers[i]
			line(undef(p.Name), RealAddress(p.Real), u(p.LinkRx), u(p.LinkTx), OpenVPNTime(p.Since))
		}
		line("ROUTING TABLE")
		line("Virtual Address", "Common Name", "Real Address", "Last Ref")
		for i := range peers {
			p := &peers[i]
			for _, r := range routes(p) {
				line(r, undef(p.Name), RealAddress(p.Real), OpenVPNTime(lastRef(p)))
			}
		}
		line("GLOBAL STATS")
		line("Max bcast/mcast queue length", "0")
		line("END")
	case 2, 3:
		sep := ","
		if version == 3 {
			sep = "\t"
		}
		rec := func(fields ...string) {
			b.WriteString(strings.Join(fields, sep))
			b.WriteString(eol)
		}
		rec("TITLE", Title(s.Version))
		rec("TIME", OpenVPNTime(now), u(uint64(now.Unix())))
		rec("HEADER", "CLIENT_LIST", "Common Name", "Real Address", "Virtual Address", "Virtual IPv6 Address",
			"Bytes Received", "Bytes Sent", "Connected Since", "Connected Since (time_t)", "Username", "Client ID",
			"Peer ID", "Data Channel Cipher")
		for i := range peers {
			p := &peers[i]
			v4, v6 := peerAddrs(p)
			rec("CLIENT_LIST", undef(p.Name), RealAddress(p.Real), v4, v6, u(p.LinkRx), u(p.LinkTx),
				OpenVPNTime(p.Since), u(uint64(p.Since.Unix())), undef(p.Username), u(p.ClientID),
				u(uint64(p.PeerID)), p.Cipher)
		}
		rec("HEADER", "ROUTING_TABLE", "Virtual Address", "Common Name", "Real Address", "Last Ref", "Last Ref (time_t)")
		for i := range peers {
			p := &peers[i]
			t := lastRef(p)
			for _, r := range routes(p) {
				rec("ROUTING_TABLE", r, undef(p.Name), RealAddress(p.Real), OpenVPNTime(t), u(uint64(t.Unix())))
			}
		}
		rec("GLOBAL_STATS", "Max bcast/mcast queue length", "0")
		rec("GLOBAL_STATS", "dco_enabled", "0")
		rec("END")
	default:
		line("ERROR: bad status format version number")
	}
}

// routes are a client's routing-table entries: its tunnel addresses
// (bare, as openvpn prints host routes), then the networks behind it.
func routes(p *VPNPeer) []string {
	v4, v6 := peerAddrs(p)
	var out []string
	for _, a := range []string{v4, v6} {
		if a != "" {
			out = append(out, a)
		}
	}
	return append(out, p.IRoutes...)
}
