package control

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/ovfwd/ovfwd/vpn"
)

// Pushed is what the server told the client in its PUSH_REPLY (push.c
// process_incoming_push_msg, options.c apply_push_options). Options the client does not act on are kept in Other.
type Pushed struct {
	IPv4     netip.Prefix // ifconfig: the client's address and the tunnel subnet
	Gateway4 netip.Addr   // route-gateway
	IPv6     netip.Prefix // ifconfig-ipv6: the client's address and prefix length
	Gateway6 netip.Addr   // the server's tunnel IPv6 address
	Routes   []netip.Prefix

	PeerID      uint32 // vpn.PeerIDUndefined when none was pushed
	Cipher      vpn.Cipher
	EKM         bool // data keys from TLS-EKM (key-derivation / protocol-flags tls-ekm)
	Ping        time.Duration
	PingRestart time.Duration
	TunMTU      int
	Comp        vpn.Comp
	Other       []string

	complete bool // the last message (no push-continuation 2) was parsed
}

var errPushReply = errors.New("control: malformed PUSH_REPLY")

// parsePushReply adds the options of one PUSH_REPLY message to p and reports
// whether more messages follow (push-continuation 2).
func parsePushReply(msg string, p *Pushed) (more bool, err error) {
	rest, ok := strings.CutPrefix(msg, msgPushReply)
	if !ok || (rest != "" && rest[0] != ',') {
		return false, errPushReply
	}
	for opt := range strings.SplitSeq(rest, ",") {
		f := strings.Fields(opt)
		if len(f) == 0 {
			continue
		}
		if err := p.apply(f); err != nil {
			return false, err
		}
		if f[0] == "push-continuation" && len(f) == 2 {
			more = f[1] == "2"
		}
	}
	return more, nil
}

func (p *Pushed) apply(f []string) error {
	bad := func() error { return errors.New("control: bad pushed option " + strings.Join(f, " ")) }
	switch f[0] {
	case "ifconfig":
		if len(f) != 3 {
			return bad()
		}
		a, err1 := netip.ParseAddr(f[1])
		m, err2 := netip.ParseAddr(f[2])
		if err1 != nil || err2 != nil || !a.Is4() || !m.Is4() {
			return bad()
		}
		bits := maskBits(m.As4())
		if bits < 0 {
			// net30/p2p topology: the second address is the peer, not a mask.
			bits = 32
		}
		p.IPv4 = netip.PrefixFrom(a, bits)
	case "ifconfig-ipv6":
		if len(f) < 2 {
			return bad()
		}
		pf, err := netip.ParsePrefix(f[1])
		if err != nil || !pf.Addr().Is6() {
			return bad()
		}
		p.IPv6 = pf
		if len(f) > 2 {
			p.Gateway6, _ = netip.ParseAddr(f[2])
		}
	case "route-gateway":
		if len(f) != 2 {
			return bad()
		}
		p.Gateway4, _ = netip.ParseAddr(f[1])
	case "route":
		if len(f) < 2 {
			return bad()
		}
		a, err := netip.ParseAddr(f[1])
		if err != nil || !a.Is4() {
			return bad()
		}
		bits := 32
		if len(f) > 2 {
			m, err := netip.ParseAddr(f[2])
			if err != nil || !m.Is4() || maskBits(m.As4()) < 0 {
				return bad()
			}
			bits = maskBits(m.As4())
		}
		p.Routes = append(p.Routes, netip.PrefixFrom(a, bits).Masked())
	case "route-ipv6":
		if len(f) < 2 {
			return bad()
		}
		pf, err := netip.ParsePrefix(f[1])
		if err != nil {
			return bad()
		}
		p.Routes = append(p.Routes, pf.Masked())
	case "peer-id":
		if len(f) != 2 {
			return bad()
		}
		v, err := strconv.ParseUint(f[1], 10, 32)
		if err != nil || v > maxPeerID {
			return bad()
		}
		p.PeerID = uint32(v)
	case "cipher":
		if len(f) != 2 {
			return bad()
		}
		p.Cipher = cipherByName(f[1])
		if p.Cipher == vpn.CipherNone {
			return errors.New("control: pushed cipher " + f[1] + " is not supported")
		}
	case "key-derivation":
		p.EKM = len(f) == 2 && f[1] == "tls-ekm"
	case "protocol-flags":
		for _, fl := range f[1:] {
			if fl == "tls-ekm" {
				p.EKM = true
			}
		}
	case "ping", "ping-restart", "tun-mtu":
		if len(f) != 2 {
			return bad()
		}
		v, err := strconv.Atoi(f[1])
		if err != nil || v < 0 || v > 1<<20 {
			return bad()
		}
		switch f[0] {
		case "ping":
			p.Ping = time.Duration(v) * time.Second
		case "ping-restart":
			p.PingRestart = time.Duration(v) * time.Second
		default:
			p.TunMTU = v
		}
	case "compress":
		if len(f) == 2 && f[1] == "stub-v2" {
			p.Comp = vpn.CompStubV2
		} else {
			return errors.New("control: pushed compression " + strings.Join(f, " ") + " is not supported")
		}
	case "comp-lzo":
		if len(f) == 2 && f[1] == "no" {
			p.Comp = vpn.CompLZO
		} else {
			return errors.New("control: pushed compression " + strings.Join(f, " ") + " is not supported")
		}
	case "push-continuation", "topology", "tun-ipv6":
	default:
		p.Other = append(p.Other, strings.Join(f, " "))
	}
	return nil
}

// maskBits is the prefix length of a contiguous netmask, or -1.
func maskBits(m [4]byte) int {
	v := uint32(m[0])<<24 | uint32(m[1])<<16 | uint32(m[2])<<8 | uint32(m[3])
	bits := 0
	for v&(1<<31) != 0 {
		v <<= 1
		bits++
	}
	if v != 0 {
		return -1
	}
	return bits
}

func cipherByName(name string) vpn.Cipher {
	for _, c := range []vpn.Cipher{vpn.AES256GCM, vpn.AES128GCM, vpn.ChaCha20Poly1305} {
		if strings.EqualFold(name, c.String()) {
			return c
		}
	}
	return vpn.CipherNone
}
