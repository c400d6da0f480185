package control

import (
	"net/netip"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/vpn"
)

// TestParsePushReply parses what a 2.6.14 server sent on the wire
// and a continued reply.
func TestParsePushReply(t *testing.T) {
	p := Pushed{PeerID: vpn.PeerIDUndefined}
	more, err := parsePushReply("PUSH_REPLY,tun-ipv6,route-gateway 10.8.0.1,topology subnet,ping 10,ping-restart 60,ifconfig-ipv6 fd00:8::1000/64 fd00:8::1,ifconfig 10.8.0.2 255.255.255.0,peer-id 7,cipher AES-256-GCM,protocol-flags cc-exit tls-ekm dyn-tls-crypt,tun-mtu 1500,push-continuation 2", &p)
	if err != nil || !more {
		t.Fatalf("more %v err %v", more, err)
	}
	more, err = parsePushReply("PUSH_REPLY,route 192.0.2.0 255.255.255.0,route-ipv6 2001:db8::/32,dhcp-option DNS 192.0.2.53,push-continuation 1", &p)
	if err != nil || more {
		t.Fatalf("more %v err %v", more, err)
	}
	want := Pushed{
		IPv4: netip.MustParsePrefix("10.8.0.2/24"), Gateway4: netip.MustParseAddr("10.8.0.1"),
		IPv6: netip.MustParsePrefix("fd00:8::1000/64"), Gateway6: netip.MustParseAddr("fd00:8::1"),
		PeerID: 7, Cipher: vpn.AES256GCM, EKM: true, Ping: 10 * time.Second, PingRestart: time.Minute, TunMTU: 1500,
	}
	if p.IPv4 != want.IPv4 || p.Gateway4 != want.Gateway4 || p.IPv6 != want.IPv6 || p.Gateway6 != want.Gateway6 ||
		p.PeerID != want.PeerID || p.Cipher != want.Cipher || !p.EKM || p.Ping != want.Ping || p.PingRestart != want.PingRestart || p.TunMTU != 1500 {
		t.Errorf("parsed %+v", p)
	}
	if len(p.Routes) != 2 || p.Routes[0] != netip.MustParsePrefix("192.0.2.0/24") || p.Routes[1] != netip.MustParsePrefix("2001:db8::/32") {
		t.Errorf("routes %v", p.Routes)
	}
	if len(p.Other) != 1 || p.Other[0] != "dhcp-option DNS 192.0.2.53" {
		t.Errorf("other %v", p.Other)
	}
	for _, bad := range []string{"PUSH_REPLYX", "PUSH_REPLY,peer-id 16777215", "PUSH_REPLY,cipher BF-CBC", "PUSH_REPLY,ifconfig 10.0.0.1", "PUSH_REPLY,route 10.0.0.0 255.0.255.0", "PUSH_REPLY,compress lz4"} {
		var q Pushed
		if _, err := parsePushReply(bad, &q); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzPushReply(f *testing.F) {
	f.Add("PUSH_REPLY,route-gateway 10.8.0.1,topology subnet,ping 10,ping-restart 60,ifconfig 10.8.0.2 255.255.255.0,peer-id 0,cipher AES-256-GCM,protocol-flags cc-exit tls-ekm")
	f.Add("PUSH_REPLY,ifconfig-ipv6 fd00::2/64 fd00::1,route-ipv6 ::/0,push-continuation 2")
	f.Add("PUSH_REPLY,route 10.0.0.0 255.255.255.0,key-derivation tls-ekm,comp-lzo no,tun-mtu 1400")
	f.Add("PUSH_REPLY,,, ,ifconfig 1.2.3.4 255.255.255.252")
	f.Fuzz(func(t *testing.T, msg string) {
		var p Pushed
		_, err := parsePushReply(msg, &p)
		if err == nil && p.IPv4.IsValid() && !p.IPv4.Addr().Is4() {
			t.Fatalf("non-IPv4 ifconfig %v accepted", p.IPv4)
		}
	})
}

func FuzzProfile(f *testing.F) {
	f.Add([]byte("client\ndev tun\nproto udp\nremote 198.18.0.1 1194\ndata-ciphers AES-256-GCM\n<ca>\nx\n</ca>\n"))
	f.Add([]byte("remote [2001:db8::1]:1194\n<tls-crypt>\n-----BEGIN OpenVPN Static key V1-----\n-----END OpenVPN Static key V1-----\n</tls-crypt>\n"))
	f.Add([]byte("<cert>\n"))
	f.Add([]byte("remote\n")) // found by the fuzzer: a bare remote

	f.Add([]byte("proto tcp\nremote 1.2.3.4\nreneg-sec 10\nkey-direction 1\nauth SHA256\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		_, _ = ParseProfile(text)
	})
}
