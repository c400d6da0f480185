package control

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/vpn"
)

func TestPushReplyContent(t *testing.T) {
	p := pushParams{
		vpn4: netip.MustParseAddr("198.18.8.2"), gw4: netip.MustParseAddr("198.18.8.1"), bits4: 24,
		vpn6: netip.MustParseAddr("2001:db8:8::1000"), gw6: netip.MustParseAddr("2001:db8:8::1"), bits6: 64,
		routes: []netip.Prefix{netip.MustParsePrefix("198.19.0.0/16"), netip.MustParsePrefix("2001:db8:99::/48")},
		ping:   10 * time.Second, pingRestart: 60 * time.Second,
		peerID: 7, cipher: "AES-256-GCM", ivProto: 990, mtu: 1500,
	}
	msgs := pushReplies(p.pushOptions())
	want := "PUSH_REPLY,route-gateway 198.18.8.1,topology subnet,ping 10,ping-restart 60," +
		"ifconfig-ipv6 2001:db8:8::1000/64 2001:db8:8::1,ifconfig 198.18.8.2 255.255.255.0," +
		"route 198.19.0.0 255.255.0.0,route-ipv6 2001:db8:99::/48," +
		"peer-id 7,cipher AES-256-GCM,protocol-flags cc-exit tls-ekm,tun-mtu 1500"
	if len(msgs) != 1 || msgs[0] != want {
		t.Fatalf("push reply\n got %q\nwant %q", msgs, want)
	}

	// A client without cc-exit but with EKM gets key-derivation; without
	// DATA_V2 no peer-id; comp-lzo clients get their stub.
	p.ivProto = ivProtoTLSKeyExp
	p.compression = vpn.CompStubV2
	got := pushReplies(p.pushOptions())[0]
	for _, s := range []string{",key-derivation tls-ekm", ",compress stub-v2"} {
		if !strings.Contains(got, s) {
			t.Errorf("missing %q in %q", s, got)
		}
	}
	for _, s := range []string{"peer-id", "protocol-flags"} {
		if strings.Contains(got, s) {
			t.Errorf("unexpected %q in %q", s, got)
		}
	}
	p.compression = vpn.CompLZO
	if got := pushReplies(p.pushOptions())[0]; !strings.Contains(got, ",comp-lzo no") {
		t.Errorf("comp-lzo client: %q", got)
	}
}

func TestPushReplyContinuation(t *testing.T) {
	var opts []string
	for i := 0; i < 120; i++ {
		opts = append(opts, "route 198.19.0.0 255.255.255.0")
	}
	msgs := pushReplies(opts)
	if len(msgs) < 3 {
		t.Fatalf("%d messages", len(msgs))
	}
	total := 0
	for i, m := range msgs {
		if len(m)+1 > pushBundleSize {
			t.Errorf("message %d is %d bytes", i, len(m))
		}
		if !strings.HasPrefix(m, "PUSH_REPLY,") {
			t.Errorf("message %d: %q", i, m[:20])
		}
		wantTail := ",push-continuation 2"
		if i == len(msgs)-1 {
			wantTail = ",push-continuation 1"
		}
		if !strings.HasSuffix(m, wantTail) {
			t.Errorf("message %d does not end with %q", i, wantTail)
		}
		total += strings.Count(m, ",route ")
	}
	if total != 120 {
		t.Errorf("%d routes pushed, want 120", total)
	}
}

func TestNegotiateCipher(t *testing.T) {
	srv := []string{"AES-256-GCM", "AES-128-GCM", "CHACHA20-POLY1305"}
	for _, c := range []struct {
		client []string
		want   string
	}{
		{[]string{"CHACHA20-POLY1305", "AES-128-GCM"}, "AES-128-GCM"},
		{[]string{"chacha20-poly1305"}, "CHACHA20-POLY1305"},
		{[]string{"BF-CBC"}, ""},
		{nil, ""},
	} {
		if got := negotiateCipher(srv, c.client); got != c.want {
			t.Errorf("%v: %q, want %q", c.client, got, c.want)
		}
	}
}
