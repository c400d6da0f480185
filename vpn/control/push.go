package control

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/ovfwd/ovfwd/vpn"
)

// pushParams is what one PUSH_REPLY says to one client (push.c
// prepare_push_reply, send_push_reply).
type pushParams struct {
	vpn4, gw4    netip.Addr
	bits4        int
	vpn6, gw6    netip.Addr
	bits6        int
	routes       []netip.Prefix
	ping         time.Duration
	pingRestart  time.Duration
	peerID       uint32
	cipher       string
	ivProto      uint32
	mtu          int
	compression  vpn.Comp
	extraOptions []string
}

// pushOptions lists the options in the order a 2.6 server sends them.
func (p *pushParams) pushOptions() []string {
	var o []string
	if p.gw4.IsValid() {
		o = append(o, "route-gateway "+p.gw4.String())
	}
	o = append(o, "topology subnet")
	if p.ping > 0 {
		o = append(o, fmt.Sprintf("ping %d", int(p.ping/time.Second)))
	}
	if p.pingRestart > 0 {
		o = append(o, fmt.Sprintf("ping-restart %d", int(p.pingRestart/time.Second)))
	}
	if p.vpn6.IsValid() {
		o = append(o, fmt.Sprintf("ifconfig-ipv6 %s/%d %s", p.vpn6, p.bits6, p.gw6))
	}
	if p.vpn4.IsValid() {
		mask := net.CIDRMask(p.bits4, 32)
		o = append(o, fmt.Sprintf("ifconfig %s %s", p.vpn4, net.IP(mask)))
	}
	for _, r := range p.routes {
		if r.Addr().Is4() {
			o = append(o, fmt.Sprintf("route %s %s", r.Masked().Addr(), net.IP(net.CIDRMask(r.Bits(), 32))))
		} else {
			o = append(o, "route-ipv6 "+r.Masked().String())
		}
	}
	o = append(o, p.extraOptions...)
	if p.ivProto&ivProtoDataV2 != 0 {
		o = append(o, fmt.Sprintf("peer-id %d", p.peerID))
	}
	o = append(o, "cipher "+p.cipher)
	switch {
	case p.ivProto&ivProtoCCExit != 0:
		o = append(o, "protocol-flags cc-exit tls-ekm")
	case p.ivProto&ivProtoTLSKeyExp != 0:
		o = append(o, "key-derivation tls-ekm")
	}
	switch p.compression {
	case vpn.CompStubV2:
		o = append(o, "compress stub-v2")
	case vpn.CompLZO:
		o = append(o, "comp-lzo no")
	}
	if p.mtu > 0 {
		o = append(o, fmt.Sprintf("tun-mtu %d", p.mtu))
	}
	return o
}

// pushReplies packs options into PUSH_REPLY messages below
// PUSH_BUNDLE_SIZE, marking continuation when more than one is needed.
func pushReplies(opts []string) []string {
	const cont = ",push-continuation 2"
	var msgs []string
	cur := msgPushReply
	for _, o := range opts {
		if len(cur)+1+len(o)+len(cont)+1 > pushBundleSize && cur != msgPushReply {
			msgs = append(msgs, cur+cont)
			cur = msgPushReply
		}
		cur += "," + o
	}
	if len(msgs) > 0 {
		cur += ",push-continuation 1"
	}
	return append(msgs, cur)
}

// negotiateCipher picks the first of the server's ciphers the client
// offers (ssl_ncp.c ncp_get_best_cipher).
func negotiateCipher(server []string, client []string) string {
	for _, s := range server {
		for _, c := range client {
			if strings.EqualFold(s, c) {
				return s
			}
		}
	}
	return ""
}
